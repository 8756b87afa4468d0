"""The skip plan: what the evaluation job scores, fixed from calibration questions alone.

A :class:`SkipPlan` is written by the selection job (:mod:`entropy_lens.skipping.selection`) as
JSON and read by the evaluation job and the analyses; it holds no model, so reading it costs
no torch import.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any

from entropy_lens.skipping.conditions import INTACT, RANDOM, SINGLE, Condition, Selection, sweep_conditions


@dataclass(frozen=True)
class SkipPlan:
    """What the evaluation job scores, fixed from calibration questions alone.

    Attributes:
        model: The model's name.
        n_layers: Its blocks.
        delta_h: ``L`` mean Delta H at the answer position (nats; NaN at layer 0).
        selections: Expansion and pruning blocks per variant and ``k``.
        sets: ``intact`` and the ``k >= 2`` conditions (selected sets and random populations).
        n_calibration: Calibration questions behind ``delta_h``.
    """

    model: str
    n_layers: int
    delta_h: tuple[float, ...]
    selections: tuple[Selection, ...]
    sets: tuple[Condition, ...]
    n_calibration: int

    @property
    def sweep(self) -> list[Condition]:
        """``intact`` and every block skipped alone (scored on every evaluation question)."""
        return sweep_conditions(self.n_layers)

    def profiled(self) -> list[Condition]:
        """The conditions worth a profile: intact, each selected block or set, the first random set per ``k``."""
        singles = sorted(
            {s.expansion[0] for s in self.selections if s.k == 1} | {s.pruning[0] for s in self.selections if s.k == 1}
        )
        chosen = [Condition(INTACT, 0), *(Condition(SINGLE, 1, (layer,)) for layer in singles)]
        return chosen + [
            c for c in self.sets if c.kind not in (INTACT, RANDOM) or (c.kind == RANDOM and c.replicate == 0)
        ]

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (NaN as ``None``)."""
        return {
            "model": self.model,
            "n_layers": self.n_layers,
            "n_calibration": self.n_calibration,
            "delta_h": [v if math.isfinite(v) else None for v in self.delta_h],
            "selections": [s.to_dict() for s in self.selections],
            "sets": [c.to_dict() for c in self.sets],
        }

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> SkipPlan:
        """Inverse of :meth:`to_dict`."""
        return cls(
            str(record["model"]),
            int(record["n_layers"]),
            tuple(math.nan if v is None else float(v) for v in record["delta_h"]),
            tuple(Selection.from_dict(s) for s in record["selections"]),
            tuple(Condition.from_dict(c) for c in record["sets"]),
            int(record["n_calibration"]),
        )


def write_plan(plan: SkipPlan, path: str | os.PathLike) -> None:
    """Write a :class:`SkipPlan` as JSON."""
    with open(path, "w") as handle:
        json.dump(plan.to_dict(), handle, indent=2, allow_nan=False)


def read_plan(path: str | os.PathLike) -> SkipPlan:
    """A :class:`SkipPlan` written by :func:`write_plan`."""
    with open(path) as handle:
        return SkipPlan.from_dict(json.load(handle))
