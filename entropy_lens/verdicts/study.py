"""The study's own words and figures (``data/study.yaml``), the models it names, and the scopes of its
layer-skip and shape claims.

Scopes follow the study's words: the Llama claims cover the models configured as ``family: llama`` (Meta's
Llama models; a model of another lab built on the Llama architecture is its own family and gets extension
rows); the Gemma-2-2B-it claim covers that model, recognised by its name or hub id.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

import yaml

from entropy_lens.skipping.conditions import EXPANSION, PRUNING
from entropy_lens.verdicts.claim import EXTENSION, FINDING

if TYPE_CHECKING:
    from entropy_lens.verdicts.claim import Claim

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
