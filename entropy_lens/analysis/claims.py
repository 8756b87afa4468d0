"""The study's claims as this project tests them: their names, roles, scopes and published figures.

A row of the paper table (:mod:`entropy_lens.analysis.paper`) names one of these claims.  Its
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

from entropy_lens.answers.conditions import EXPANSION, PRUNING, RANDOM

FINDING = "finding"
PRECONDITION = "precondition"
EXTENSION = "extension"
ROLES = (FINDING, PRECONDITION, EXTENSION)

# Claims, as rows name them.
TASK = "task separability (intact prompts)"
SCRAMBLED = "task separability (scrambled control)"
FORMAT = "format separability"
MMLU_CORRECT = "MMLU correctness separability"
FAMILY = "family separability (blank prompts)"
MODEL_IDENTITY = "model identity (blank prompts; one model per family)"
FAMILY_HELDOUT = "family held out across size: an unseen model's blank profiles fall in its own family"
IMAGE_CLASS = "image class separability (image classifiers)"
RENYI = "Rényi entropy leaves the separability conclusions intact"
SPEARMAN = "Spearman ΔH vs Δ nucleus size"
OVERLAP = "adjacent layers share most of their top-p sets"
ACCURACY = "MMLU accuracy above chance and the majority letter"
SKIP_VS_RANDOM = "skipping the expansion block(s) vs random blocks"
PRUNING_VS_RANDOM = "skipping the pruning block(s) vs random blocks"
SKIP_VS_PRUNING = "skipping the expansion block(s) vs the pruning block(s)"
SKIP_COLLAPSE = "skipping the single largest-expansion block collapses MMLU to chance"
SKIP_RANK = "the cost of skipping a block follows its entropy change (rank over blocks)"
CLUSTERING = "family, not size, clusters blank-prompt profiles"
SIZE_RESOLUTION = "size as resolution: normalized depth aligns a family's sizes better than absolute layer"
SHAPE_GPT = "GPT profiles start high and sharpen"
SHAPE_LLAMA = "Llama profiles start low, plateau, then refine"

# The order a reader meets them in.
CLAIM_ORDER = (
    TASK,
    SCRAMBLED,
    FORMAT,
    FAMILY,
    FAMILY_HELDOUT,
    MODEL_IDENTITY,
    IMAGE_CLASS,
    SPEARMAN,
    OVERLAP,
    MMLU_CORRECT,
    SKIP_COLLAPSE,
    SKIP_VS_RANDOM,
    SKIP_VS_PRUNING,
    PRUNING_VS_RANDOM,
    SKIP_RANK,
    RENYI,
    CLUSTERING,
    SIZE_RESOLUTION,
    SHAPE_GPT,
    SHAPE_LLAMA,
    ACCURACY,
)
SKIP_CLAIMS = (SKIP_COLLAPSE, SKIP_VS_RANDOM, SKIP_VS_PRUNING, PRUNING_VS_RANDOM, SKIP_RANK)
# kNN target (:data:`entropy_lens.analysis.knn.STUDY_TARGETS`) -> its claim and independent sources.
KNN_CLAIMS = {
    "task": TASK,
    "task_scrambled": SCRAMBLED,
    "format": FORMAT,
    "mmlu_correct": MMLU_CORRECT,
    "family": FAMILY,
    "image_class": IMAGE_CLASS,
}
KNN_UNITS = {
    "task": "stories",
    "task_scrambled": "stories",
    "format": "topics",
    "mmlu_correct": "questions",
    "family": "blank samples",
    "image_class": "images",
}
KNN_DATASETS = {
    "task": "tasks",
    "task_scrambled": "tasks",
    "format": "formats",
    "mmlu_correct": "mmlu",
    "family": "blank",
    "image_class": "images",
}
# Targets beyond the study's claims (extensions).
EXTENSION_TARGETS = ("image_class",)
# Comparisons of the skip experiment (first, second) -> the claim their row names.
SKIP_COMPARISON_CLAIMS = {
    (EXPANSION, RANDOM): SKIP_VS_RANDOM,
    (PRUNING, RANDOM): PRUNING_VS_RANDOM,
    (EXPANSION, PRUNING): SKIP_VS_PRUNING,
}

# ----------------------------------------------------------------------- the study's figures

NO_FIGURE = "—"
# Task AUC (percent): kNN on Shannon profiles of the tasks set.
STUDY_TASK_AUC: dict[str, float] = {
    "Gemma-2-2B": 97.66,
    "Gemma-2-9B": 98.38,
    "Llama-3.2-1B": 94.94,
    "Llama-3.2-3B": 94.77,
    "Llama-3-8B": 96.10,
    "Phi-3-mini": 97.07,
}
# Format AUC (mean, std; percent) with Shannon entropy, measured on the instruct (-it) variants.
STUDY_FORMAT_AUC: dict[str, tuple[float, float]] = {"Gemma-2-2B": (98.7, 1.1), "Llama-3.2-1B": (97.8, 2.4)}
# MMLU (low, high) ranges over the study's models and prompt styles, per family (percent).
STUDY_MMLU_ACCURACY: dict[str, tuple[float, float]] = {"llama": (50.89, 60.62), "gemma": (55.0, 56.0)}
STUDY_MMLU_AUC: dict[str, tuple[float, float]] = {"llama": (67.23, 73.61), "gemma": (68.36, 72.78)}
STUDY_FAMILY_CLAIM = "profiles cluster by family, not by size (dendrogram, no score)"
STUDY_RESOLUTION_CLAIM = "qualitative (after depth normalization a smaller model looks like a coarser sampling)"
STUDY_OVERLAP_CLAIM = "adjacent layers share most of their top-p sets (qualitative)"
STUDY_SHAPE_CLAIM = "qualitative (mean profiles by family)"
STUDY_RENYI_CLAIM = "conclusions unchanged for α = 0.5, 1, 5"
# Lower-case name prefixes (after any ``org/``) that identify a study model.
STUDY_MODEL_ALIASES: dict[str, tuple[str, ...]] = {
    "Gemma-2-2B": ("gemma-2-2b",),
    "Gemma-2-9B": ("gemma-2-9b",),
    "Llama-3.2-1B": ("llama-3.2-1b",),
    "Llama-3.2-3B": ("llama-3.2-3b",),
    "Llama-3-8B": ("llama-3-8b", "meta-llama-3-8b"),
    "Phi-3-mini": ("phi-3-mini", "phi-3"),
}

# ----------------------------------------------------------------------- layer-skip scopes

LLAMA_SCOPE = "llama"
GEMMA2_SCOPE = "Gemma-2-2B"
# What the study says about layer skipping, for the scopes it names; quoted no further.
STUDY_SKIP_SENTENCE = {
    LLAMA_SCOPE: "Llama: skipping the single largest-expansion layer collapses MMLU to chance",
    GEMMA2_SCOPE: "Gemma-2-2B-it: pruning layers matter more",
}
NO_SKIP_CLAIM = "no claim for this model (the study: Llama, expansion layers critical; Gemma-2-2B-it, pruning layers)"
# Scope -> claim -> the outcome the study's sentence implies; claims not listed are extensions there.
SKIP_EXPECTED: dict[str, dict[str, str]] = {
    LLAMA_SCOPE: {
        SKIP_COLLAPSE: "collapse",
        SKIP_VS_RANDOM: f"{EXPANSION} more critical",
        SKIP_VS_PRUNING: f"{EXPANSION} more critical",
        SKIP_RANK: f"{EXPANSION} more critical",
    },
    GEMMA2_SCOPE: {
        SKIP_VS_PRUNING: f"{PRUNING} more critical",
        SKIP_RANK: f"{PRUNING} more critical",
    },
}
# Family shape claims: config families they cover, and the architecture (config.json model_type)
# whose models of another family get the same rows as extensions.
SHAPE_FAMILIES: dict[str, tuple[str, ...]] = {"gpt": ("gpt", "gpt2"), "llama": ("llama",)}
SHAPE_ARCHITECTURES: dict[str, tuple[str, ...]] = {"gpt": ("gpt2",), "llama": ("llama",)}
SHAPE_ROWS = {"gpt": SHAPE_GPT, "llama": SHAPE_LLAMA}


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
