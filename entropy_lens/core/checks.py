"""Argument checks that several library modules share: one message for one mistake."""

from __future__ import annotations

from typing import Any

import numpy as np


def check_positive_int(value: Any, name: str) -> int:
    """``value`` as an int, or ``ValueError`` naming ``name`` unless it is a positive integer."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)
