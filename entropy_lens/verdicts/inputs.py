"""An input of the paper table: an analysis table, where the workflow writes it and when, how it is read, which rows
it gives, and how a fitted lens recomputes it.

Each topic's module of :mod:`entropy_lens.verdicts.claims` declares its inputs beside its claims, which name the ones
they read (:class:`entropy_lens.verdicts.tested.TestedClaim`); :mod:`entropy_lens.verdicts.table` reads them in the
order the registry's claims first name them, and the workflow hands the paper table each one's path
(``verdicts.table.PAPER_TABLES``, read by ``rules/common.smk``: the library declares the relative path of a table,
never one built from the configuration).  The verdicts
under a fitted lens (:mod:`entropy_lens.verdicts.robustness`) re-run, on profiles read under that lens, every
input whose ``from_store`` is a function of one dataset's combined profile store; an input that cannot be
recomputed from a profile store says why instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from entropy_lens.analysis.separability.heldout import BLANK
from entropy_lens.core.frames import Reading
from entropy_lens.verdicts.rows import Expected, RowRule, rows_of

if TYPE_CHECKING:
    import pandas as pd
    import xarray as xr

    from entropy_lens.analysis.features import FeatureSettings
    from entropy_lens.analysis.separability.settings import KnnSettings

Rows = list[dict[str, Any]]


@dataclass(frozen=True)
class StoreSettings:
    """The run's settings an analysis of one store needs.

    Attributes:
        knn, features: The kNN settings (separability, the held-out family).
        n_boot, seed: Bootstrap replicates and seed of the intervals.
        grid_points: The normalized-depth grid of the same-family pairs (``analysis.depth.depth_grid``).
    """

    knn: KnnSettings
    features: FeatureSettings
    n_boot: int
    seed: int
    grid_points: int


# (combined store of one dataset, the dataset's name, settings) -> the input's table, or None where the store
# cannot give it (too few models, another dataset).
StoreAnalysis = Callable[["xr.Dataset", str, StoreSettings], "pd.DataFrame | None"]


def families_read(store: xr.Dataset, dataset: str) -> bool:
    """Whether the family claims are read from this store: the blank set, two models or more."""
    return dataset == BLANK and store.sizes["model"] >= 2


@dataclass(frozen=True)
class Built:
    """What the row builders of the inputs see: the inputs as standard frames, the rows built so far (in
    input order) and what the configuration asked for."""

    frames: Mapping[str, pd.DataFrame | None]
    rows: Rows
    expected: Expected

    @property
    def scopes(self) -> Mapping[str, str | None]:
        """The family each layer-skip model's claims are scoped to (:meth:`Expected.skip_scopes`)."""
        return self.expected.skip_scopes()


# When the configuration makes an input's table (PaperInput.made): always, or only with the MMLU set, the family
# analysis, the layer-skip experiment or a fitted lens enabled. rules/common.smk maps each to its configuration.
ALWAYS, WITH_MMLU, WITH_FAMILIES, WITH_LAYER_SKIP, WITH_LENSES = "always", "mmlu", "families", "layer_skip", "lenses"
CONDITIONS = (ALWAYS, WITH_MMLU, WITH_FAMILIES, WITH_LAYER_SKIP, WITH_LENSES)


@dataclass(frozen=True)
class PaperInput:
    """One analysis table the paper table reads.

    Attributes:
        name: Its keyword of the paper table (:func:`entropy_lens.verdicts.table.paper_table`).
        what: The function whose output it is (for readers and error messages).
        reading: How it becomes a standard frame (:mod:`entropy_lens.core.frames`); ``None``: read as it is
            (a table another input's rows consult).
        rows: ``Built -> rows`` of its claims; ``None`` for a table only another input's rows read.
        from_store: How the table is recomputed from one dataset's combined profile store, so its claims are
            judged again under a fitted lens; or why it is not (a sentence).
        path: Where the workflow writes it, relative to the run's folder; ``{dataset}`` for one table per enabled
            dataset, stacked.
        made: When the configuration makes it (:data:`CONDITIONS`).
        columns: The columns its analysis writes (its data contract on disk; the tests read each through its reading).
    """

    name: str
    what: str
    reading: Reading | None
    rows: Callable[[Built], Rows] | None = None
    from_store: StoreAnalysis | str = field(kw_only=True)
    path: str = field(kw_only=True)
    made: str = field(default=ALWAYS, kw_only=True)
    columns: tuple[str, ...] = field(default=(), kw_only=True)

    def __post_init__(self) -> None:
        if self.made not in CONDITIONS:
            raise ValueError(f"input {self.name!r}: made must be one of {CONDITIONS}, got {self.made!r}")


def rule_rows(name: str, rule: RowRule) -> Callable[[Built], Rows]:
    """Rows of input ``name`` under one row rule."""
    return lambda built: rows_of(built.frames[name], rule)


def given(name: str, rows: Callable[[Built], Rows]) -> Callable[[Built], Rows]:
    """``rows`` where input ``name`` was given, none otherwise."""
    return lambda built: rows(built) if built.frames[name] is not None else []


# Why an input is not recomputed from a profile store (PaperInput.from_store).
FROM_ANSWERS = "read from the answers (MMLU scoring, the layer-skip experiment), not from a profile store"
LOGIT_LENS_ONLY = "read under the logit lens only"
