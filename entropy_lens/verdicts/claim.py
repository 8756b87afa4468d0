"""A claim as this project tests it: one record (:class:`Claim`), its role and which of its rows the verdict
table shows (:class:`Headline`).

A row of the paper table (:mod:`entropy_lens.verdicts.table`) names one claim.  Its *role* says how it is
counted:

* ``finding``: a claim of the study about models of the scope it names;
* ``precondition``: not a claim of the study; it decides whether other claims can be read
  (MMLU accuracy, for the correctness and layer-skip claims);
* ``extension``: the same measurement on a model or family the study made no claim about (a
  Llama-architecture model of another family, a family the skip claims do not name, model
  identity where each family has one model); reported with its outcome, counted apart.

Each record lives in its claim's object (:class:`entropy_lens.verdicts.tested.TestedClaim`) in its topic's module of
:mod:`entropy_lens.verdicts.claims`; :mod:`entropy_lens.verdicts.registry` lists them in reading order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from entropy_lens.answers.letters import VERDICT_MEASURE
from entropy_lens.verdicts.decision import Verdict
from entropy_lens.verdicts.outcomes import Outcome
from entropy_lens.verdicts.units import LOGPROB

FINDING = "finding"
PRECONDITION = "precondition"
EXTENSION = "extension"
ROLES = (FINDING, PRECONDITION, EXTENSION)
# The measures and scale a headline reads (as the analyses name them: Shannon entropy, containment of adjacent
# top-p sets, the same-family pairs' entropy / log V), and how a claim measured per MMLU style is shown.
SHANNON, CONTAINMENT_STATISTIC, HEADLINE_SCALE = "shannon", "containment", "normalized"
POOLED, PER_STYLE = "pooled", "per style"
# How a claim's headline rows combine into its word (docs/verdicts.md, "One aggregation rule per claim"): every row
# must hold (a claim about every model in its scope), or its one pooled row decides.
EVERY = "every"
AGGREGATIONS = (EVERY, POOLED)


@dataclass(frozen=True)
class Headline:
    """Which of a claim's rows the verdict table shows (:func:`entropy_lens.verdicts.table.headline`); the
    rest stay in the full table. The default shows every row with a verdict.

    Attributes:
        measures: The measures shown (``None``: every one).
        splits: The splits shown (``None``: every one).
        hidden_units: Units never shown.
        smallest_k: Of the rows whose split starts ``k=<n>``, show those at the smallest ``k`` among the rows of
            every claim that sets this (the claims of one experiment share its smallest ``k``).
        styles: :data:`POOLED`: the row pooled over MMLU styles where the claim and model have one;
            :data:`PER_STYLE`: the per-style rows where they have them (the pooled row only where not); ``""``: both.
        shown: ``False``: none of its rows (they stay in the full table, in their section).
        extension_units: Where set, the units shown for extension rows instead (their primary statistic;
            ``hidden_units`` then applies to findings only).
    """

    measures: tuple[str, ...] | None = None
    splits: tuple[str, ...] | None = None
    hidden_units: tuple[str, ...] = ()
    smallest_k: bool = False
    styles: str = ""
    shown: bool = True
    extension_units: tuple[str, ...] | None = None


# Separability on Shannon entropy (the Rényi orders are the renyi claim's); the skip experiment at its smallest k,
# on the verdict measure's accuracy (the study's statistic; log p of the gold letter stays in the full table).
SHANNON_ROWS = Headline(measures=(SHANNON, ""))
SKIP_ROWS = Headline(measures=(VERDICT_MEASURE, ""), hidden_units=(LOGPROB,), smallest_k=True)
# The skip comparisons: a finding reads the study's statistic (accuracy); an extension row (the study states no
# statistic for its model) reads the gold letter's log-probability, paired over questions, accuracy beside it.
SKIP_COMPARISON_ROWS = Headline(
    measures=(VERDICT_MEASURE, ""), hidden_units=(LOGPROB,), smallest_k=True, extension_units=(LOGPROB,)
)


@dataclass(frozen=True)
class Claim:
    """One claim as this project tests it: what the study says, what is measured, how it is judged.

    Attributes:
        id: Short stable key (``task``, ``skip_collapse``).
        name: The ``claim`` column of its rows.
        sentence: The study's words (or, for a precondition or extension, what the rows check).
        role: :data:`FINDING`, :data:`PRECONDITION` or :data:`EXTENSION`; layer-skip and shape rows
            of a model outside the study's scope are extensions whatever this says
            (:func:`entropy_lens.verdicts.study.skip_scope`,
            :func:`~entropy_lens.verdicts.study.shape_scope`).
        unit: What the interval resamples (stories, questions, ...): the unit of the verdict's n.
        dataset: The prompt set it reads.
        rule: The verdict rule its rows are judged by, a function of :mod:`entropy_lens.verdicts.rules` or
            :mod:`entropy_lens.verdicts.outcomes` (``docs/verdicts.md`` states each).
        figure: Key of the study's published figure under ``figures`` in ``data/study.yaml``, or of
            its sentence under ``sentences`` where it gives no number; ``""`` for none.
        knn_target: The kNN target (:data:`entropy_lens.analysis.separability.targets.STUDY_TARGETS`) whose rows test
            it; ``""`` for claims of other analyses.
        headline: Which of its rows the verdict table shows.
        aggregation: How those rows combine into the claim's word (:data:`AGGREGATIONS`; fixed with the claim,
            before any result): :data:`EVERY` row must hold, or the :data:`POOLED` row decides.
    """

    id: str
    name: str
    sentence: str
    role: str
    unit: str
    dataset: str
    rule: Callable[..., Verdict | Outcome]
    figure: str = ""
    knn_target: str = ""
    headline: Headline = Headline()
    aggregation: str = EVERY

    def __post_init__(self) -> None:
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"claim {self.id!r}: aggregation must be one of {AGGREGATIONS}, got {self.aggregation!r}")


# The dataset of the layer-skip claims: the experiment's questions, not a profiled prompt set.
SKIP_EXPERIMENT = "layer_skip_eval"
