"""The study's claims as this project tests them: their names, roles, scopes and published figures.

A row of the paper table (:mod:`entropy_lens.verdicts.table`) names one of these claims.  Its
*role* says how it is counted:

* ``finding``: a claim of the study about models of the scope it names;
* ``precondition``: not a claim of the study; it decides whether other claims can be read
  (MMLU accuracy, for the correctness and layer-skip claims);
* ``extension``: the same measurement on a model or family the study made no claim about (a
  Llama-architecture model of another family, a family the skip claims do not name, model
  identity where each family has one model); reported with its outcome, counted apart.

Scopes follow the study's words: the Llama claims cover the models configured as ``family:
llama`` (Meta's Llama models; a model of another lab built on the Llama architecture is its own
family and gets extension rows); the Gemma-2-2B-it claim covers that model, recognised by its
name or hub id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib import resources

import yaml

from entropy_lens.answers.conditions import EXPANSION, PRUNING, RANDOM
from entropy_lens.answers.letters import VERDICT_MEASURE
from entropy_lens.verdicts import outcomes as O
from entropy_lens.verdicts import rules as V
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
    """

    measures: tuple[str, ...] | None = None
    splits: tuple[str, ...] | None = None
    hidden_units: tuple[str, ...] = ()
    smallest_k: bool = False
    styles: str = ""
    shown: bool = True


# Separability on Shannon entropy (the Rényi orders are the renyi claim's); the skip experiment at its smallest k,
# on the verdict measure's accuracy (the study's statistic; log p of the gold letter stays in the full table).
SHANNON_ROWS = Headline(measures=(SHANNON, ""))
SKIP_ROWS = Headline(measures=(VERDICT_MEASURE, ""), hidden_units=(LOGPROB,), smallest_k=True)


@dataclass(frozen=True)
class Claim:
    """One claim as this project tests it: what the study says, what is measured, how it is judged.

    Attributes:
        id: Short stable key (``task``, ``skip_collapse``).
        name: The ``claim`` column of its rows.
        sentence: The study's words (or, for a precondition or extension, what the rows check).
        role: :data:`FINDING`, :data:`PRECONDITION` or :data:`EXTENSION`; layer-skip and shape rows
            of a model outside the study's scope are extensions whatever this says
            (:func:`skip_scope`, :func:`shape_scope`).
        unit: What the interval resamples (stories, questions, ...): the unit of the verdict's n.
        dataset: The prompt set it reads.
        rule: The verdict rule its rows are judged by, a function of :mod:`entropy_lens.verdicts.rules` or
            :mod:`entropy_lens.verdicts.outcomes` (``docs/verdicts.md`` states each).
        figure: Key of the study's published figure under ``figures`` in ``data/study.yaml``, or of
            its sentence under ``sentences`` where it gives no number; ``""`` for none.
        knn_target: The kNN target (:data:`entropy_lens.analysis.separability.targets.STUDY_TARGETS`) whose rows test
            it; ``""`` for claims of other analyses.
        headline: Which of its rows the verdict table shows.
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


# The registry, in the order a reader meets the claims. A claim is one record here, its analysis, and
# its row rule in its topic's module of entropy_lens.verdicts.claims (docs/architecture.md, "A claim").
CLAIMS: tuple[Claim, ...] = (
    Claim(
        id="task",
        name="task separability (intact prompts)",
        sentence="entropy profiles separate the task (continue, count words, extract gist)",
        role=FINDING,
        unit="stories",
        dataset="tasks",
        rule=V.separability,
        figure="task_auc",
        knn_target="task",
        headline=SHANNON_ROWS,
    ),
    Claim(
        id="scrambled",
        name="task separability (scrambled control)",
        sentence="the task is still told apart when the story's words are scrambled (control)",
        role=FINDING,
        unit="stories",
        dataset="tasks",
        rule=V.separability,
        figure="task_auc",
        knn_target="task_scrambled",
        headline=SHANNON_ROWS,
    ),
    Claim(
        id="format",
        name="format separability",
        sentence="entropy profiles separate the output format (poem, scientific blurb, chat log)",
        role=FINDING,
        unit="topics",
        dataset="formats",
        rule=V.separability,
        figure="format_auc",
        knn_target="format",
        headline=SHANNON_ROWS,
    ),
    Claim(
        id="family",
        name="family separability (blank prompts)",
        sentence="blank-prompt profiles tell model families apart",
        role=FINDING,
        unit="blank samples",
        dataset="blank",
        rule=V.separability,
        figure="family",
        knn_target="family",
        headline=SHANNON_ROWS,
    ),
    Claim(
        id="family_heldout",
        name="family held out across size: an unseen model's blank profiles fall in its own family",
        sentence="profiles cluster by family, not size: a model left out falls in its family",
        role=FINDING,
        unit="blank samples",
        dataset="blank",
        rule=V.held_out_family,
        figure="family",
        headline=Headline(measures=(SHANNON,)),
    ),
    Claim(
        id="model_identity",
        name="model identity (blank prompts; one model per family)",
        sentence="with one model per family, family separability is model identity",
        role=EXTENSION,
        unit="blank samples",
        dataset="blank",
        rule=V.separability,
        headline=Headline(measures=(SHANNON,)),
    ),
    Claim(
        id="image_class",
        name="image class separability (image classifiers)",
        sentence="beyond the study: image classes from image classifiers' profiles",
        role=EXTENSION,
        unit="images",
        dataset="images",
        rule=V.separability,
        figure="",
        knn_target="image_class",
        headline=SHANNON_ROWS,
    ),
    Claim(
        id="spearman",
        name="Spearman ΔH vs Δ nucleus size",
        sentence="rising entropy is the candidate set expanding, falling entropy pruning",
        role=FINDING,
        unit="prompts",
        dataset="tasks",
        rule=V.above_threshold,
        figure="spearman",
    ),
    Claim(
        id="overlap",
        name="adjacent layers share most of their top-p sets",
        sentence="adjacent layers share most of their top-p sets",
        role=FINDING,
        unit="prompts",
        dataset="tasks",
        rule=V.above_threshold,
        figure="overlap",
        headline=Headline(measures=(CONTAINMENT_STATISTIC,)),
    ),
    Claim(
        id="mmlu_correct",
        name="MMLU correctness separability",
        sentence="entropy profiles separate right from wrong MMLU answers",
        role=FINDING,
        unit="questions",
        dataset="mmlu",
        rule=V.separability,
        figure="mmlu_auc",
        knn_target="mmlu_correct",
        headline=Headline(measures=(SHANNON, ""), styles=PER_STYLE),
    ),
    Claim(
        id="skip_collapse",
        name="skipping the single largest-expansion block collapses MMLU to chance",
        sentence="on Llama, skipping the single largest-expansion layer collapses MMLU to chance",
        role=FINDING,
        unit="questions",
        dataset="layer_skip_eval",
        rule=O.collapse,
        figure="skip_llama",
        headline=SKIP_ROWS,
    ),
    Claim(
        id="skip_vs_random",
        name="skipping the expansion block(s) vs random blocks",
        sentence="expansion layers are more critical than random layers (Llama)",
        role=FINDING,
        unit="questions (and random sets)",
        dataset="layer_skip_eval",
        rule=O.skip_outcome,
        figure="skip_llama",
        headline=SKIP_ROWS,
    ),
    Claim(
        id="skip_vs_pruning",
        name="skipping the expansion block(s) vs the pruning block(s)",
        sentence="Llama: expansion layers matter more; Gemma-2-2B-it: pruning layers matter more",
        role=FINDING,
        unit="questions",
        dataset="layer_skip_eval",
        rule=O.skip_outcome,
        figure="skip_llama",
        headline=SKIP_ROWS,
    ),
    Claim(
        id="pruning_vs_random",
        name="skipping the pruning block(s) vs random blocks",
        sentence="pruning layers against random layers (no claim of the study's own)",
        role=EXTENSION,
        unit="questions (and random sets)",
        dataset="layer_skip_eval",
        rule=O.skip_outcome,
        headline=SKIP_ROWS,
    ),
    Claim(
        id="skip_rank",
        name="the cost of skipping a block follows its entropy change (rank over blocks)",
        sentence="rank of each block's ΔH against the cost of skipping it (no claim of the study's own: it compares "
        "the selected layers with random ones)",
        role=EXTENSION,
        unit="questions, blocks",
        dataset="layer_skip_eval",
        rule=O.rank_outcome,
        headline=SKIP_ROWS,
    ),
    Claim(
        id="renyi",
        name="Rényi entropy leaves the separability conclusions intact",
        sentence="Rényi entropy (α = 0.5, 1, 5) leaves the conclusions intact",
        role=FINDING,
        unit="sources of each split",
        dataset="",
        rule=V.renyi_equivalence,
        figure="renyi",
        headline=Headline(splits=("",)),  # the claim's summary; its per-order rows name a split
    ),
    Claim(
        id="clustering",
        name="family, not size, clusters blank-prompt profiles",
        sentence="blank-prompt profiles cluster by model family, not size",
        role=FINDING,
        unit="blank samples",
        dataset="blank",
        rule=V.family_not_size,
        figure="family",
        headline=Headline(measures=(HEADLINE_SCALE, "")),
    ),
    Claim(
        id="size_resolution",
        name="size as resolution: normalized depth aligns a family's sizes better than absolute layer",
        sentence="after depth normalization a smaller model looks like a coarser sampling of the same schedule",
        role=FINDING,
        unit="blank samples",
        dataset="blank",
        rule=V.size_resolution,
        figure="resolution",
        headline=Headline(measures=(HEADLINE_SCALE, "")),
    ),
    Claim(
        id="shape_gpt",
        name="GPT profiles start high and sharpen",
        sentence="GPT profiles start high and sharpen",
        role=FINDING,
        unit="prompts",
        dataset="",
        rule=V.family_shape,
        figure="shape",
    ),
    Claim(
        id="shape_llama",
        name="Llama profiles start low, plateau, then refine",
        sentence="Llama profiles start low, plateau, then refine",
        role=FINDING,
        unit="prompts",
        dataset="",
        rule=V.family_shape,
        figure="shape",
    ),
    Claim(
        id="accuracy",
        name="MMLU accuracy above chance and the majority letter",
        sentence="precondition: a model must know MMLU before its right and wrong answers can be compared",
        role=PRECONDITION,
        unit="questions",
        dataset="mmlu",
        rule=V.accuracy,
        figure="mmlu_accuracy",
        headline=Headline(measures=(VERDICT_MEASURE, ""), styles=POOLED),
    ),
    Claim(
        id="mmlu_correct_calibrated",
        name="MMLU correctness separability (calibrated letter)",
        sentence="variant: right from wrong by the calibrated letter, an answer the greedy generation need not give",
        role=EXTENSION,
        unit="questions",
        dataset="mmlu",
        rule=V.separability,
        knn_target="mmlu_correct_calibrated",
        headline=SHANNON_ROWS,
    ),
    Claim(
        id="correct_beyond_confidence",
        name="MMLU correctness: the profile beyond the model's confidence",
        sentence="does the profile carry correctness beyond the final-layer entropy and the top-letter probability?",
        role=EXTENSION,
        unit="questions",
        dataset="mmlu",
        rule=V.above_threshold,
    ),
    Claim(
        id="task_beyond_baselines",
        name="task separability beyond the first token and the prompt text",
        sentence="does the profile tell tasks apart beyond its first token and a bag of words on the prompt?",
        role=EXTENSION,
        unit="stories",
        dataset="tasks",
        rule=V.above_threshold,
    ),
    Claim(
        id="format_beyond_baselines",
        name="format separability beyond the first token and the prompt text",
        sentence="does the profile tell formats apart beyond its first token and a bag of words on the prompt?",
        role=EXTENSION,
        unit="topics",
        dataset="formats",
        rule=V.above_threshold,
    ),
    Claim(
        id="drop_sets",
        name="dropping the k blocks a pruning criterion ranks least critical vs random k-sets",
        sentence="which k blocks can you drop? each criterion's k least critical blocks (ΔH, Block Influence, "
        "angular distance, position) and Gromov's contiguous span, skipped together, against random k-sets "
        "(no claim of the study's own)",
        role=EXTENSION,
        unit="questions, random sets",
        dataset="layer_skip_eval",
        rule=O.drop_set,
        # one row per criterion, share, variant and statistic: the full table's section; its k count toward the
        # experiment's smallest k
        headline=replace(SKIP_ROWS, shown=False),
    ),
)
BY_ID: dict[str, Claim] = {c.id: c for c in CLAIMS}
# The dataset of the layer-skip claims: the experiment's questions, not a profiled prompt set.
SKIP_EXPERIMENT = "layer_skip_eval"

# Claims, as rows name them (the ``claim`` column, for readers; code keys rows by ``claim_id``).
TASK, SCRAMBLED, FORMAT = (BY_ID[i].name for i in ("task", "scrambled", "format"))
FAMILY, FAMILY_HELDOUT, MODEL_IDENTITY = (BY_ID[i].name for i in ("family", "family_heldout", "model_identity"))
IMAGE_CLASS, SPEARMAN, OVERLAP = (BY_ID[i].name for i in ("image_class", "spearman", "overlap"))
MMLU_CORRECT, RENYI, ACCURACY = (BY_ID[i].name for i in ("mmlu_correct", "renyi", "accuracy"))
SKIP_COLLAPSE, SKIP_VS_RANDOM, SKIP_VS_PRUNING, PRUNING_VS_RANDOM, SKIP_RANK = (
    BY_ID[i].name for i in ("skip_collapse", "skip_vs_random", "skip_vs_pruning", "pruning_vs_random", "skip_rank")
)
CLUSTERING, SIZE_RESOLUTION = BY_ID["clustering"].name, BY_ID["size_resolution"].name
SHAPE_GPT, SHAPE_LLAMA = BY_ID["shape_gpt"].name, BY_ID["shape_llama"].name

# Claim ids in reading order, and the ids of the layer-skip claims.
CLAIM_ORDER = tuple(c.id for c in CLAIMS)
SKIP_CLAIMS = tuple(c.id for c in CLAIMS if c.dataset == SKIP_EXPERIMENT)
# kNN target -> its claim's id, the unit its intervals resample and its prompt set.
KNN_CLAIMS = {c.knn_target: c.id for c in CLAIMS if c.knn_target}
KNN_UNITS = {c.knn_target: c.unit for c in CLAIMS if c.knn_target}
KNN_DATASETS = {c.knn_target: c.dataset for c in CLAIMS if c.knn_target}
# Targets beyond the study's claims (extensions).
EXTENSION_TARGETS = tuple(c.knn_target for c in CLAIMS if c.knn_target and c.role == EXTENSION)
# Comparisons of the skip experiment (first, second) -> the id of the claim their row names.
SKIP_COMPARISON_CLAIMS = {
    (EXPANSION, RANDOM): "skip_vs_random",
    (PRUNING, RANDOM): "pruning_vs_random",
    (EXPANSION, PRUNING): "skip_vs_pruning",
}

# ----------------------------------------------------------------------- the study's figures (data/study.yaml)

STUDY = yaml.safe_load(resources.files("entropy_lens").joinpath("data/study.yaml").read_text(encoding="utf-8"))
NO_FIGURE = "—"
STUDY_TASK_AUC: dict[str, float] = STUDY["figures"]["task_auc"]
STUDY_FORMAT_AUC: dict[str, tuple[float, float]] = {m: tuple(v) for m, v in STUDY["figures"]["format_auc"].items()}
STUDY_MMLU_ACCURACY: dict[str, tuple[float, float]] = {
    f: tuple(v) for f, v in STUDY["figures"]["mmlu_accuracy"].items()
}
STUDY_MMLU_AUC: dict[str, tuple[float, float]] = {f: tuple(v) for f, v in STUDY["figures"]["mmlu_auc"].items()}
STUDY_SPEARMAN: dict[str, float] = STUDY["figures"]["spearman"]


def study_sentence(claim: Claim) -> str:
    """The study's words for a claim whose figure is a sentence (``""`` where it is a number or none)."""
    return STUDY["sentences"].get(claim.figure, "")


STUDY_FAMILY_CLAIM = STUDY["sentences"]["family"]
STUDY_RESOLUTION_CLAIM = STUDY["sentences"]["resolution"]
STUDY_RENYI_CLAIM = STUDY["sentences"]["renyi"]
# Lower-case name prefixes (after any ``org/``) that identify a study model.
STUDY_MODEL_ALIASES: dict[str, tuple[str, ...]] = {m: tuple(p) for m, p in STUDY["models"].items()}

# ----------------------------------------------------------------------- layer-skip scopes

LLAMA_SCOPE = "llama"
GEMMA2_SCOPE = "Gemma-2-2B"
# What the study says about layer skipping, for the scopes it names; quoted no further.
STUDY_SKIP_SENTENCE = {
    LLAMA_SCOPE: STUDY["sentences"]["skip_llama"],
    GEMMA2_SCOPE: STUDY["sentences"]["skip_gemma2"],
}
SKIP_SCOPE_NAMES = {LLAMA_SCOPE: "the Llama family", GEMMA2_SCOPE: "Gemma-2-2B-it"}
NO_SKIP_CLAIM = "no claim for this model (the study: Llama, expansion layers critical; Gemma-2-2B-it, pruning layers)"
# Scope -> claim id -> the outcome the study's sentence implies; claims not listed are extensions there.
SKIP_EXPECTED: dict[str, dict[str, str]] = {
    LLAMA_SCOPE: {
        "skip_collapse": "collapse",
        "skip_vs_random": f"{EXPANSION} more critical",
        "skip_vs_pruning": f"{EXPANSION} more critical",
    },
    GEMMA2_SCOPE: {
        "skip_vs_pruning": f"{PRUNING} more critical",
    },
}
# Family shape claims: config families they cover, and the architecture (config.json model_type)
# whose models of another family get the same rows as extensions.
SHAPE_FAMILIES: dict[str, tuple[str, ...]] = {"gpt": ("gpt", "gpt2"), "llama": ("llama",)}
SHAPE_ARCHITECTURES: dict[str, tuple[str, ...]] = {"gpt": ("gpt2",), "llama": ("llama",)}
# Shape claim key -> its claim id.
SHAPE_ROWS = {"gpt": "shape_gpt", "llama": "shape_llama"}


def claim(claim_id: str) -> Claim:
    """The registered claim of an id (a row's ``claim_id``).

    Raises:
        ValueError: naming the unknown id and the registered ones.
    """
    if claim_id not in BY_ID:
        raise ValueError(f"unknown claim id {claim_id!r}; registered: {list(BY_ID)}")
    return BY_ID[claim_id]


def study_model_for(model: str) -> str | None:
    """The study model that ``model`` (a config name or hub id) is, or ``None``."""
    name = model.rsplit("/", 1)[-1].lower()
    for study, prefixes in STUDY_MODEL_ALIASES.items():
        for prefix in prefixes:
            rest = name[len(prefix) :]
            if name.startswith(prefix) and (not rest or not rest[0].isalnum()):
                return study
    return None


def skip_scope(model: str, family: str, source: str = "") -> str | None:
    """The layer-skip scope the study names for this model (:data:`SKIP_EXPECTED` key), or ``None``."""
    if GEMMA2_SCOPE in {study_model_for(model), study_model_for(source)}:
        return GEMMA2_SCOPE
    return LLAMA_SCOPE if family.strip().lower() == "llama" else None


def shape_scope(family: str, architecture: str = "") -> tuple[str, str] | None:
    """``(shape claim key, role)`` for a model: a finding for its family's claim, an extension for a
    model of another family with that claim's architecture, else ``None``."""
    name = family.strip().lower()
    for key, families in SHAPE_FAMILIES.items():
        if name in families:
            return key, FINDING
    for key, architectures in SHAPE_ARCHITECTURES.items():
        if architecture.strip().lower() in architectures:
            return key, EXTENSION
    return None
