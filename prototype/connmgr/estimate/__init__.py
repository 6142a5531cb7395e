"""The operator's estimate: what the proposal would save on a fleet."""
