"""Seeds to random streams: every consumer of randomness gets its own reproducible stream,
so the simulator and a real client given the same seed draw the same numbers."""

from __future__ import annotations

import random


def derive_rng(seed: int, stream: str) -> random.Random:
    """An independent, reproducible random stream named ``stream`` for run ``seed``."""
    return random.Random(f"{seed}:{stream}")
