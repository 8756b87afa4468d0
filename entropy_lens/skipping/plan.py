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

from entropy_lens.skipping.conditions import INTACT, LOGIT, Condition, Selection, selected_conditions, sweep_conditions


@dataclass(frozen=True)
class SkipPlan:
    """What the evaluation job scores, fixed from calibration questions alone.

    Attributes:
        model: The model's name.
        n_layers: Its blocks.
        delta_h: ``L`` mean Delta H at the answer position under the logit lens (nats; NaN at layer 0).
        selections: Expansion and pruning blocks per lens, variant and ``k``.
        n_calibration: Calibration questions behind ``delta_h``.
        delta_h_linear: The same under the fitted linear lens (empty without one).
    """

    model: str
    n_layers: int
    delta_h: tuple[float, ...]
    selections: tuple[Selection, ...]
    n_calibration: int
    delta_h_linear: tuple[float, ...] = ()

    @property
    def sweep(self) -> list[Condition]:
        """``intact`` and every block skipped alone (scored on the sweep's questions)."""
        return sweep_conditions(self.n_layers)

    @property
    def chosen(self) -> list[Condition]:
        """Each block or set a selection chose, once (:func:`~entropy_lens.skipping.conditions.selected_conditions`)."""
        return selected_conditions(self.selections)

    @property
    def lenses(self) -> tuple[str, ...]:
        """The lenses the selections read Delta H through, the logit lens first."""
        return tuple(dict.fromkeys([LOGIT, *(s.lens for s in self.selections)]))

    def profiled(self) -> list[Condition]:
        """The conditions worth a profile: intact and each selected block or set."""
        return [Condition(INTACT, 0), *self.chosen]

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (NaN as ``None``)."""
        return {
            "model": self.model,
            "n_layers": self.n_layers,
            "n_calibration": self.n_calibration,
            "delta_h": _json(self.delta_h),
            "delta_h_linear": _json(self.delta_h_linear),
            "selections": [s.to_dict() for s in self.selections],
        }

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> SkipPlan:
        """Inverse of :meth:`to_dict`."""
        return cls(
            str(record["model"]),
            int(record["n_layers"]),
            _floats(record["delta_h"]),
            tuple(Selection.from_dict(s) for s in record["selections"]),
            int(record["n_calibration"]),
            _floats(record.get("delta_h_linear", [])),
        )


def _json(values: tuple[float, ...]) -> list[float | None]:
    return [v if math.isfinite(v) else None for v in values]


def _floats(values: list[float | None]) -> tuple[float, ...]:
    return tuple(math.nan if v is None else float(v) for v in values)


def write_plan(plan: SkipPlan, path: str | os.PathLike) -> None:
    """Write a :class:`SkipPlan` as JSON."""
    with open(path, "w") as handle:
        json.dump(plan.to_dict(), handle, indent=2, allow_nan=False)


def read_plan(path: str | os.PathLike) -> SkipPlan:
    """A :class:`SkipPlan` written by :func:`write_plan`."""
    with open(path) as handle:
        return SkipPlan.from_dict(json.load(handle))
