"""Estimates for operators: what the proposal would change, from logs, metrics or a fleet."""
