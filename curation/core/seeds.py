"""Seeds derived from the run seed, so a draw never depends on order, chunking or a resume."""

import hashlib
import random


def derive_seed(seed: int, *parts: str) -> int:
    """A 63-bit seed from the run seed and names (stage, item id, ...)."""
    digest = hashlib.sha256(":".join([str(seed), *parts]).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def derive_rng(seed: int, *parts: str) -> random.Random:
    return random.Random(derive_seed(seed, *parts))
