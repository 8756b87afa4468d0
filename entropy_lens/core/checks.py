"""Argument checks that several layers share: one message for one mistake."""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any

import numpy as np


def check_positive_int(value: Any, name: str) -> int:
    """``value`` as an int, or ``ValueError`` naming ``name`` unless it is a positive integer."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_layers(layers: Iterable[int], n_layers: int) -> list[int]:
    """Validate block indices: integers in ``0..n_layers-1``, each at most once.

    Returns:
        The indices as Python ints, in the order given.

    Raises:
        TypeError: for an index that is not an integer.
        ValueError: for an index out of range or listed twice.
    """
    checked: list[int] = []
    for value in layers:
        if isinstance(value, bool):
            raise TypeError(f"layer index must be an integer, got {value!r}")
        try:
            index = operator.index(value)
        except TypeError as err:
            raise TypeError(f"layer index must be an integer, got {value!r} ({type(value).__name__})") from err
        if not 0 <= index < n_layers:
            raise ValueError(f"layer {index} is out of range: the model has {n_layers} blocks, valid 0..{n_layers - 1}")
        if index in checked:
            raise ValueError(f"layer {index} is listed twice; list each block to skip once")
        checked.append(index)
    return checked
