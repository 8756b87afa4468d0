"""A claim as this project tests it, in one object: its record, its row rule, the tables it reads, its null and why
it may not have been run (:class:`TestedClaim`).

Each topic's module of :mod:`entropy_lens.verdicts.claims` writes its claims as these objects;
:mod:`entropy_lens.verdicts.registry` lists them in reading order, and everything keyed by claim is derived from that
one list: the records (``registry.CLAIMS``), the paper table's inputs and the tables the workflow hands it
(``verdicts.table.INPUTS``, ``PAPER_TABLES``), the planted-null simulators and their caps (``verdicts.nulls``), the
planted-true simulations (``verdicts.mechanical``), each claim's own "not run" reason (``verdicts.absences``) and
its random-init twin's reading (``verdicts.twins``).

A null's simulator is named by its import path (``"package.module:function"``) and imported where it runs: the
simulators run the lens on random logits, the kNN and the skip comparisons, and some of them read the claim modules
themselves, so a job that reads the verdicts without drawing (and the registry) loads none of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from entropy_lens.verdicts.claim import Claim
from entropy_lens.verdicts.inputs import Built, PaperInput, Rows
from entropy_lens.verdicts.rows import Expected, RowRule

if TYPE_CHECKING:
    from entropy_lens.core.planted import Shown


# A simulator: its import path ("package.module:function"), or the function itself (a test's).
Simulator = str | Callable[..., Any]


def resolve(path: Simulator) -> Callable[..., Any]:
    """The function an import path (``"package.module:function"``) names (a function is itself).

    Raises:
        ValueError: where the path has no ``:`` or names no function of its module.
    """
    if callable(path):
        return path
    module, _, name = path.partition(":")
    function = getattr(importlib.import_module(module), name, None) if name else None
    if not callable(function):
        raise ValueError(f"{path!r} names no function; write 'package.module:function'")
    return function


@dataclass(frozen=True)
class PlantedTrue:
    """A claim's planted-true simulation (:mod:`entropy_lens.verdicts.mechanical`).

    Attributes:
        simulator: Import path of ``(units, draws, seed, *, shown) -> share``: the share of draws on data where the
            claim holds by construction whose excess over the null ``shown`` calls beyond it.
        margin: The rule's margin (:data:`~entropy_lens.verdicts.decision.NULL_MARGINS`).
        max_units: The most units a draw simulates (the row's own count, capped).
        instead: What tests the claim where its statistic is mechanical.
    """

    simulator: Simulator
    margin: float
    max_units: int
    instead: str

    def rate(self, units: int, draws: int, seed: int, shown: Shown) -> float:
        """The simulator's share of ``draws`` draws at ``units`` units shown beyond the null."""
        return resolve(self.simulator)(units, draws, seed, shown=shown)


@dataclass(frozen=True)
class PlantedNull:
    """A claim's planted null: how often its rule shows "beyond its null" on data simulated under that null, on the
    row's own design (:mod:`entropy_lens.verdicts.nulls`).

    Attributes:
        simulator: Import path of ``(units, draws, seed, **keywords) -> share``.
        margin: The statistic (a key of :data:`~entropy_lens.verdicts.decision.NULL_MARGINS`), or the margin itself,
            at which the table's one decision reads each draw's excess, handed to the simulator as ``shown``; ``""``
            for a simulator that decides itself.
        min_units: The fewest units simulated (a kNN needs folds of a few samples).
        keywords: Further keyword arguments of the simulator, as ``(name, value)`` pairs.
        at_row: Import path of ``row -> (simulator, its parameters)`` for a simulator that reads the row itself (its
            bar, its styles); ``""`` for none.
        max_draws: The most draws, where each draw reruns a whole analysis (``None``: the table's own cap).
        max_units: The most units a draw simulates (``None``: the row's own count).
        planted_true: Its planted-true simulation, for a claim whose null can reach the study's bar.
    """

    simulator: Simulator
    margin: str | float = ""
    min_units: int = 0
    keywords: tuple[tuple[str, Any], ...] = ()
    at_row: Simulator = ""
    max_draws: int | None = None
    max_units: int | None = None
    planted_true: PlantedTrue | None = None


@dataclass(frozen=True)
class NoNull:
    """Why a claim's rows carry no null of their own.

    Raises:
        ValueError: for an empty reason.
    """

    reason: str

    def __post_init__(self) -> None:
        if not self.reason.strip():
            raise ValueError("a claim without a null of its own must say why: NoNull(reason) got an empty reason")


# The twin table's readings (entropy_lens.analysis.twins): the kNN scores, a profile's shape, the same-family pairs.
SEPARABILITY, SHAPE, FAMILY_PAIR = "separability", "shape", "family_pair"


@dataclass(frozen=True)
class TwinRule:
    """Where a claim's row finds its twin reading, and how it is judged.

    Attributes:
        reading: The twin table's ``reading``.
        target: The twin table's ``target`` (separability; the shape's key for shapes), else ``""``.
        statistic: The twin table's ``statistic`` (``""``: the row's ``measure`` names it).
        margin: The rule's margin (:data:`~entropy_lens.verdicts.decision.NULL_MARGINS`).
        bar: The study's bar: the twin shows the claim when its interval lies wholly above it.
        split_is_dataset: The row's ``split`` names the dataset (expansion, shapes); else ``dataset`` does.
        dataset: The dataset of the twin row where the row does not name it.
    """

    reading: str
    target: str = ""
    statistic: str = ""
    margin: float = 0.0
    bar: float = 0.0
    split_is_dataset: bool = False
    dataset: str = ""


# A claim's own reason it was not run, where the table's generic ones (a disabled dataset, no rows) do not say it:
# (its record, what the configuration asked for) -> the reason, or None to leave it to them.
Absence = Callable[[Claim, Expected], "str | None"]


@dataclass(frozen=True, eq=False)
class TestedClaim:
    """One claim and everything its verdict needs (compared by identity: one object per claim).

    Attributes:
        record: What the study says and how it is judged (:class:`~entropy_lens.verdicts.claim.Claim`).
        rule: Its row rule (:class:`~entropy_lens.verdicts.rows.RowRule`), or the function that builds it from
            what the run gives (the accuracy table, the configured families, the skip scopes).
        inputs: The analysis tables it reads (:class:`~entropy_lens.verdicts.inputs.PaperInput`: each with its
            path and when the configuration makes it), the one its rows come from first.
        null: Its planted null, or why it has none.
        rows: Its rows, where it builds them itself from its inputs' frames (a claim read from a table whose own
            row builder makes other claims' rows); ``None`` where an input's builder makes them.
        absence: Its own "not run" reason (:data:`Absence`); ``None`` for the table's generic ones.
        twin: Where its rows find their random-init twin's reading (:mod:`entropy_lens.verdicts.twins`), or why a
            claim of learned structure has none; ``None`` for a claim not about learned structure.
    """

    __test__ = False  # a dataclass named Test*, not a test class

    record: Claim
    rule: RowRule | Callable[..., RowRule]
    inputs: tuple[PaperInput, ...]
    null: PlantedNull | NoNull
    rows: Callable[[Built], Rows] | None = None
    absence: Absence | None = None
    twin: TwinRule | NoNull | None = None

    def __post_init__(self) -> None:
        if not self.inputs:
            raise ValueError(f"claim {self.record.id!r} reads no table: name the PaperInput its rows come from")
        if isinstance(self.rule, RowRule) and isinstance(self.rule.claim, Claim) and self.rule.claim is not self.record:
            raise ValueError(f"claim {self.record.id!r}: its row rule is that of {self.rule.claim.id!r}")
