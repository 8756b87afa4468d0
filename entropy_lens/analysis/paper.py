"""The paper comparison: each claim of the study, our estimate with its interval, and a verdict.

One row per claim, model and split.  Each row carries

* our estimate and its 95% interval over the right unit (kNN AUC: grouped folds,
  corrected resampled t; Spearman: prompt-cluster bootstrap; accuracy: Wilson over
  questions; layer skip: paired bootstrap over questions),
* the baseline it is judged against (the dummy classifier, chance or the majority
  letter), the study-protocol (ungrouped folds) figure beside the grouped one,
* the study's magnitude, and
* a verdict from :mod:`entropy_lens.analysis.verdicts` with the reason.

Claims the configuration did not measure (a dataset not profiled for a model, a model
left out of the layer-skip experiment, a family analysis with one model, a family shape
claim with no model of that family) get a row that says so: nothing is dropped silently.
:func:`headline` picks the rows a reader needs first: Shannon entropy, the verdict
measure of MMLU, one row per claim and model.

Each row has a ``role``: a ``finding`` is a claim of the study about the models; a
``precondition`` (MMLU accuracy) is not: it decides whether the correctness and
layer-skip claims can be read at all, and is counted apart from the findings.
"""

from __future__ import annotations

import html
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from entropy_lens.analysis import verdicts as V
from entropy_lens.analysis.expansion import STUDY_SPEARMAN
from entropy_lens.analysis.knn import GROUPED, POOLED_MODEL, STUDY
from entropy_lens.analysis.pairs import FAMILY_GAP, RESOLUTION_GAP
from entropy_lens.analysis.shapes import STATISTICS as SHAPE_STATISTICS
from entropy_lens.answers.accuracy import ALL_STYLES
from entropy_lens.answers.letters import VERDICT_MEASURE
from entropy_lens.core.tables import to_markdown

log = logging.getLogger(__name__)

# Study figures (percent).  Task AUC: kNN on Shannon profiles of the tasks set.
STUDY_TASK_AUC: dict[str, float] = {
    "Gemma-2-2B": 97.66,
    "Gemma-2-9B": 98.38,
    "Llama-3.2-1B": 94.94,
    "Llama-3.2-3B": 94.77,
    "Llama-3-8B": 96.10,
    "Phi-3-mini": 97.07,
}
# Format AUC (mean, std) with Shannon entropy, measured on the instruct (-it) variants.
STUDY_FORMAT_AUC: dict[str, tuple[float, float]] = {
    "Gemma-2-2B": (98.7, 1.1),
    "Llama-3.2-1B": (97.8, 2.4),
}
# MMLU (low, high) ranges over the study's models and prompt styles, per family.
STUDY_MMLU_ACCURACY: dict[str, tuple[float, float]] = {"llama": (50.89, 60.62), "gemma": (55.0, 56.0)}
STUDY_MMLU_AUC: dict[str, tuple[float, float]] = {"llama": (67.23, 73.61), "gemma": (68.36, 72.78)}
STUDY_FAMILY_CLAIM = "profiles cluster by family, not by size (dendrogram, no score)"
STUDY_SKIP_CLAIM = {
    "llama": "Llama collapses to chance when its largest-expansion layers are skipped",
    "gemma": "Gemma-2-2B-it is the exception: pruning layers matter more",
}
STUDY_SKIP_DEFAULT = "skipping expansion layers hurts MMLU more than pruning or random layers"
# Lower-case name prefixes (after any ``org/``) that identify a study model.
STUDY_MODEL_ALIASES: dict[str, tuple[str, ...]] = {
    "Gemma-2-2B": ("gemma-2-2b",),
    "Gemma-2-9B": ("gemma-2-9b",),
    "Llama-3.2-1B": ("llama-3.2-1b",),
    "Llama-3.2-3B": ("llama-3.2-3b",),
    "Llama-3-8B": ("llama-3-8b", "meta-llama-3-8b"),
    "Phi-3-mini": ("phi-3-mini", "phi-3"),
}
NO_FIGURE = "—"
PERCENT = 100.0
NOT_RUN = "not run"
STUDY_OVERLAP_CLAIM = "a large fraction (qualitative)"
STUDY_SHAPE_CLAIM = "qualitative (mean profiles by family)"

# Claims, in the order a reader meets them.
TASK = "task separability (intact prompts)"
SCRAMBLED = "task separability (scrambled control)"
FORMAT = "format separability"
MMLU_CORRECT = "MMLU correctness separability"
FAMILY = "family separability (blank prompts)"
IMAGE_CLASS = "image class separability (image classifiers)"
RENYI = "Rényi entropy leaves the separability conclusions intact"
SPEARMAN = "Spearman ΔH vs Δ nucleus size"
ACCURACY = "MMLU accuracy above chance and the majority letter"
SKIP_RANDOM = "skipping expansion layers hurts more than random layers"
SKIP_PRUNING = "skipping expansion layers hurts more than pruning layers"
CLUSTERING = "family, not size, clusters blank-prompt profiles"
SIZE_RESOLUTION = "size as resolution: a smaller model looks like a coarser sampling of its family's schedule"
STUDY_RESOLUTION_CLAIM = "qualitative (smaller models look like coarser samplings of the same schedule)"
OVERLAP = "adjacent layers share a large fraction of their top-p sets"
SHAPE_GPT = "GPT profiles start high and sharpen"
SHAPE_LLAMA = "Llama profiles start low, plateau, then refine"
# Shape claim (verdicts.SHAPE_CLAIMS key) -> its row's claim, and the config `family:` values it covers.
SHAPE_ROWS = {V.GPT_SHAPE: SHAPE_GPT, V.LLAMA_SHAPE: SHAPE_LLAMA}
SHAPE_FAMILIES: dict[str, tuple[str, ...]] = {V.GPT_SHAPE: ("gpt", "gpt2"), V.LLAMA_SHAPE: ("llama",)}
# Roles: a finding of the study about the models, or a precondition for reading other claims.
FINDING = "finding"
PRECONDITION = "precondition"
PRECONDITIONS = frozenset({ACCURACY})
# kNN target name -> claim (targets of :data:`entropy_lens.analysis.knn.STUDY_TARGETS`).
KNN_CLAIMS = {
    "task": TASK,
    "task_scrambled": SCRAMBLED,
    "format": FORMAT,
    "mmlu_correct": MMLU_CORRECT,
    "family": FAMILY,
    "image_class": IMAGE_CLASS,
}
# kNN target -> its independent sources, named where an undecided row says how many would decide it.
KNN_UNITS = {
    "task": "stories",
    "task_scrambled": "stories",
    "format": "topics",
    "mmlu_correct": "questions",
    "family": "blank samples",
}
KNN_DATASETS = {
    "task": "tasks",
    "task_scrambled": "tasks",
    "format": "formats",
    "mmlu_correct": "mmlu",
    "family": "blank",
    "image_class": "images",
}
# Targets beyond the study's claims: absent rows only for the models of a configured dataset.
EXTENSION_TARGETS = ("image_class",)

COLUMNS = (
    "claim",
    "role",
    "model",
    "split",
    "measure",
    "unit",
    "estimate",
    "ci_low",
    "ci_high",
    "baseline",
    "baseline_low",
    "baseline_high",
    "study_protocol",
    "study_protocol_low",
    "study_protocol_high",
    "study",
    "verdict",
    "why",
    "n",
    "n_sources",
    "note",
)
AUC, RHO, ACC, POINTS, JACCARD, NATS = "AUC %", "rho", "accuracy %", "accuracy points", "Jaccard", "nats"
SCALES = {AUC: PERCENT, RHO: 1.0, ACC: PERCENT, POINTS: PERCENT, JACCARD: 1.0, NATS: 1.0}


@dataclass(frozen=True)
class Expected:
    """What the configuration asked to measure, so that every absence is explained.

    Attributes:
        datasets: Dataset -> the models profiled on it (a dataset left out is disabled).
        layer_skip: Models in the layer-skip experiment (empty: the experiment is off).
        k_study: The study's kNN ``k``; a row that had to use fewer is inconclusive.
        families: Model -> family.
    """

    datasets: Mapping[str, Sequence[str]] = field(default_factory=dict)
    layer_skip: Sequence[str] = ()
    k_study: int = 29
    families: Mapping[str, str] = field(default_factory=dict)


def study_model_for(model: str) -> str | None:
    """The study model that ``model`` (a config name or hub id) is, or ``None``."""
    name = model.rsplit("/", 1)[-1].lower()
    for study, prefixes in STUDY_MODEL_ALIASES.items():
        for prefix in prefixes:
            rest = name[len(prefix) :]
            if name.startswith(prefix) and (not rest or not rest[0].isalnum()):
                return study
    return None


def _range(values: Sequence[float], spec: str = ".2f") -> str:
    return f"{min(values):{spec}}–{max(values):{spec}}"


def _interval(row: Mapping[str, Any] | pd.Series, mean: str, low: str, high: str) -> V.Interval:
    values = [row[c] for c in (mean, low, high)]
    return V.Interval(*(float(v) if v is not None and pd.notna(v) else math.nan for v in values))


def _row(claim: str, model: str, unit: str, verdict: V.Verdict, **values: Any) -> dict[str, Any]:
    """One table row; intervals (:class:`~entropy_lens.analysis.verdicts.Interval`) expand into columns."""
    row: dict[str, Any] = {c: "" for c in COLUMNS}
    role = PRECONDITION if claim in PRECONDITIONS else FINDING
    row.update(claim=claim, role=role, model=model, unit=unit, verdict=verdict.verdict, why=verdict.why)
    for key, value in values.items():
        if isinstance(value, V.Interval):
            row[key if key != "ours" else "estimate"], row[f"{_prefix(key)}_low"], row[f"{_prefix(key)}_high"] = (
                value.estimate,
                value.low,
                value.high,
            )
        else:
            row[key] = value
    return row


def _prefix(key: str) -> str:
    return "ci" if key == "ours" else key


# --------------------------------------------------------------------------- separability


def _study_auc(target: str, model: str, family: str, measure: str) -> str:
    if measure != "shannon":
        return NO_FIGURE
    matched = study_model_for(model)
    if target == "task":
        return f"{STUDY_TASK_AUC[matched]:.2f}" if matched in STUDY_TASK_AUC else _range(list(STUDY_TASK_AUC.values()))
    if target == "format":
        if matched in STUDY_FORMAT_AUC:
            return "{:.1f} ± {:.1f}".format(*STUDY_FORMAT_AUC[matched])
        return _range([m for m, _ in STUDY_FORMAT_AUC.values()])
    if target == "mmlu_correct" and family.lower() in STUDY_MMLU_AUC:
        return f"{_range(STUDY_MMLU_AUC[family.lower()])} ({family.lower()} family)"
    return NO_FIGURE


def _knn_rows(knn: pd.DataFrame, accuracy: pd.DataFrame | None, expected: Expected) -> list[dict[str, Any]]:
    rows = []
    knn = knn.assign(split=knn["split"].fillna("").astype(str), model=knn["model"].astype(str))
    study = knn[knn["protocol"] == STUDY].set_index(["target", "model", "split", "measure"])
    for rec in knn[knn["protocol"] == GROUPED].to_dict("records"):
        key = (rec["target"], rec["model"], rec["split"], rec["measure"])
        if rec["target"] == "mmlu_correct" and not rec["split"]:
            rec["split"] = ALL_STYLES  # pooled over styles, folds grouped by question
        ungrouped = study.loc[key] if key in study.index else {"auc_mean": None, "auc_low": None, "auc_high": None}
        family = expected.families.get(rec["model"], "")
        rows.append(
            _row(
                KNN_CLAIMS.get(rec["target"], rec["target"]),
                rec["model"],
                AUC,
                _separability(rec, accuracy, rec["split"], expected.k_study, expected),
                split=rec["split"],
                measure=rec["measure"],
                ours=_interval(rec, "auc_mean", "auc_low", "auc_high"),
                baseline=_interval(rec, "dummy_mean", "dummy_low", "dummy_high"),
                study_protocol=_interval(ungrouped, "auc_mean", "auc_low", "auc_high"),
                study=_study_auc(rec["target"], rec["model"], family, rec["measure"]),
                n=_int(rec.get("n_samples")),
                n_sources=_int(rec.get("n_groups")),
                note=_text(rec.get("note")),
            )
        )
    return rows


def _int(value: Any) -> Any:
    return int(value) if pd.notna(value) else ""


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _separability(
    rec: Mapping[str, Any], accuracy: pd.DataFrame | None, split: str, k_study: int, expected: Expected
) -> V.Verdict:
    if rec["target"] == "family" and "blank" in expected.datasets and (shortfall := _family_shortfall(expected)):
        return V.not_run(shortfall)
    if rec["target"] == "mmlu_correct":
        blocked = _correctness_blocked(accuracy, str(rec["model"]), split)
        if blocked is not None:
            return blocked
    note = _text(rec.get("note"))
    return V.separability(
        _interval(rec, "auc_mean", "auc_low", "auc_high"),
        _interval(rec, "dummy_mean", "dummy_low", "dummy_high"),
        k_used=int(rec["k"]) if pd.notna(rec.get("k")) else None,
        k_study=k_study,
        n_groups=int(rec["n_groups"]) if pd.notna(rec.get("n_groups")) else 0,
        skipped=note if note.startswith("skipped") else "",
        unit=KNN_UNITS.get(str(rec["target"]), "sources"),
    )


def _correctness_blocked(accuracy: pd.DataFrame | None, model: str, style: str) -> V.Verdict | None:
    """Inconclusive when the correctness label is letter bias or chance (see :func:`verdicts.answers_at_chance`)."""
    if accuracy is None:
        return None
    hit = accuracy[
        (accuracy["model"] == model) & (accuracy["style"] == style) & (accuracy["measure"] == VERDICT_MEASURE)
    ]
    if hit.empty:
        return None
    rec = hit.iloc[0]
    acc = V.Interval(rec["accuracy"], rec["ci_low"], rec["ci_high"])
    return V.answers_at_chance(acc, float(rec["chance"]), float(rec["top_share"]), str(rec["top_letter"]))


def _renyi_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One aggregate row: do the Rényi orders reach Shannon's verdicts?"""
    separability = [r for r in rows if r["claim"] in KNN_CLAIMS.values()]
    by_key: dict[tuple, dict[str, str]] = {}
    for r in separability:
        by_key.setdefault((r["claim"], r["model"], r["split"]), {})[r["measure"]] = r["verdict"]
    shannon = [v.get("shannon", "") for v in by_key.values()]
    renyi = [[verdict for m, verdict in v.items() if m != "shannon"] for v in by_key.values()]
    if not any(renyi):
        return []
    verdict = V.renyi_invariance(shannon, renyi)
    held = {key for key, v in by_key.items() if v.get("shannon") == V.REPRODUCED}
    astray = [
        f"{r['measure']}, {r['claim']} ({r['model']}{', ' + r['split'] if r['split'] else ''}): {r['why']}"
        for r in separability
        if (r["claim"], r["model"], r["split"]) in held and r["measure"] != "shannon" and r["verdict"] != V.REPRODUCED
    ]
    if astray:
        verdict = V.Verdict(verdict.verdict, f"{verdict.why}: " + "; ".join(astray))
    orders = sorted({m for v in by_key.values() for m in v if m != "shannon"})
    return [_row(RENYI, "all", "", verdict, measure=", ".join(orders), study="conclusions unchanged for α = 0.5, 1, 5")]


# --------------------------------------------------------------------------- other claims


def _spearman_rows(expansion: pd.DataFrame) -> list[dict[str, Any]]:
    rows = []
    for rec in expansion.to_dict("records"):
        matched = study_model_for(str(rec["model"]))
        study = (
            f"{STUDY_SPEARMAN[matched]:.3f}"
            if matched in STUDY_SPEARMAN
            else _range(list(STUDY_SPEARMAN.values()), ".3f")
        )
        rho = _interval(rec, "spearman", "ci_low", "ci_high")
        verdict = V.spearman(rho, n_prompts=int(rec.get("n_prompts", 0) or 0))
        rows.append(
            _row(
                SPEARMAN,
                str(rec["model"]),
                RHO,
                verdict,
                split=str(rec.get("dataset", "")),
                measure="shannon",
                ours=rho,
                study=study,
                n=int(rec["n"]),
                n_sources=int(rec.get("n_prompts", 0) or 0),
                note="n counts (token, layer) pairs; the interval resamples prompts",
            )
        )
    return rows


def _questions(accuracy: pd.DataFrame) -> list[int]:
    """Questions behind each accuracy row: its ``n``, or for a row pooled over styles (whose ``n``
    counts prompts) the most answered in one style of that model and measure."""
    per_style = accuracy[accuracy["style"] != ALL_STYLES].groupby(["model", "measure"])["n"].max()
    return [
        int(per_style.get((m, measure), n)) if style == ALL_STYLES else int(n)
        for m, style, measure, n in zip(
            accuracy["model"], accuracy["style"], accuracy["measure"], accuracy["n"], strict=True
        )
    ]


def _accuracy_rows(accuracy: pd.DataFrame, families: Mapping[str, str]) -> list[dict[str, Any]]:
    rows = []
    for rec, n_questions in zip(accuracy.to_dict("records"), _questions(accuracy), strict=True):
        family = families.get(str(rec["model"]), "").lower()
        study = (
            f"{_range(STUDY_MMLU_ACCURACY[family])} ({family} family)" if family in STUDY_MMLU_ACCURACY else NO_FIGURE
        )
        acc = _interval(rec, "accuracy", "ci_low", "ci_high")
        bar = max(float(rec["chance"]), float(rec["majority_baseline"]))
        note = (
            f"answered {rec['top_letter']} for {100 * rec['top_share']:.0f}%; gold {rec['majority_letter']} "
            f"{100 * rec['majority_baseline']:.0f}%; {int(rec['n_unparsed'])} unparsed"
        )
        rows.append(
            _row(
                ACCURACY,
                str(rec["model"]),
                ACC,
                V.accuracy(acc, chance=float(rec["chance"]), majority=float(rec["majority_baseline"]), n=n_questions),
                split=str(rec["style"]),
                measure=str(rec["measure"]),
                ours=acc,
                baseline=V.Interval(bar, math.nan, math.nan),
                study=study,
                n=int(rec["n"]),
                n_sources=int(rec["n"]),
                note=note,
            )
        )
    return rows


def _skip_rows(skip: pd.DataFrame, families: Mapping[str, str]) -> list[dict[str, Any]]:
    rows = []
    for rec in skip.to_dict("records"):
        claim = SKIP_RANDOM if rec["versus"] == "random" else SKIP_PRUNING
        diff = _interval(rec, "difference", "ci_low", "ci_high")
        intact = _interval(rec, "intact", "intact_low", "intact_high")
        chance, versus = float(rec["chance"]), str(rec["versus"])
        verdict = V.layer_skip(diff, intact=intact, chance=chance, versus=versus, n=int(rec["n"]))
        study = STUDY_SKIP_CLAIM.get(families.get(str(rec["model"]), "").lower(), STUDY_SKIP_DEFAULT)
        rows.append(
            _row(
                claim,
                str(rec["model"]),
                POINTS,
                verdict,
                split=f"k={int(rec['k'])}",
                measure=str(rec["measure"]),
                ours=diff,
                baseline=intact,
                study=study,
                n=int(rec["n"]),
                n_sources=int(rec["n"]),
                note="baseline = intact accuracy",
            )
        )
    return rows


def _overlap_rows(overlap: pd.DataFrame) -> list[dict[str, Any]]:
    rows = []
    for rec in overlap.to_dict("records"):
        jaccard = _interval(rec, "mean", "ci_low", "ci_high")
        n_prompts = int(rec.get("n_prompts", 0) or 0)
        rows.append(
            _row(
                OVERLAP,
                str(rec["model"]),
                JACCARD,
                V.nucleus_overlap(jaccard, n_prompts=n_prompts),
                split=str(rec.get("dataset", "")),
                measure="shannon",
                ours=jaccard,
                study=STUDY_OVERLAP_CLAIM,
                n=int(rec["n"]),
                n_sources=n_prompts,
                note="mean over (token, layer) cells; the interval resamples prompts",
            )
        )
    return rows


def shape_claim(family: str) -> str | None:
    """The shape claim (a :data:`SHAPE_ROWS` key) about a config ``family:``, or ``None``."""
    name = family.strip().lower()
    return next((claim for claim, names in SHAPE_FAMILIES.items() if name in names), None)


def _shape_rows(shapes: pd.DataFrame, families: Mapping[str, str]) -> list[dict[str, Any]]:
    """A verdict per model (of a family with a shape claim) and dataset; other families have no claim."""
    rows = []
    for rec in shapes.to_dict("records"):
        model = str(rec["model"])
        claim = shape_claim(str(families.get(model, rec.get("family", ""))))
        if claim is None:
            continue
        stats = {s: _interval(rec, s, f"{s}_low", f"{s}_high") for s in SHAPE_STATISTICS}
        verdict = V.family_shape(claim, stats, n_sources=int(rec["n_sources"]), third_layers=int(rec["third_layers"]))
        note = "; ".join(f"{s} {i.text(1.0, 3)}" for s, i in stats.items())
        rows.append(
            _row(
                SHAPE_ROWS[claim],
                model,
                NATS,
                verdict,
                split=str(rec.get("dataset", "")),
                measure="shannon",
                study=STUDY_SHAPE_CLAIM,
                n=int(rec["n_prompts"]),
                n_sources=int(rec["n_sources"]),
                note=f"{note}; start {float(rec['start']):.3f}, final {float(rec['final']):.3f} nats",
            )
        )
    return rows


# Pair statistic (:mod:`entropy_lens.analysis.pairs`) -> its claim, verdict rule, study figure and note.
PAIR_CLAIMS = {
    FAMILY_GAP: (CLUSTERING, V.family_not_size, STUDY_FAMILY_CLAIM, "d({small}, {large})"),
    RESOLUTION_GAP: (SIZE_RESOLUTION, V.size_resolution, STUDY_RESOLUTION_CLAIM, "r({small}, {large} at its depths)"),
}


def _pair_rows(pairs: pd.DataFrame | None, clustering: pd.DataFrame | None, expected: Expected) -> list[dict]:
    """A row per same-family pair and pair claim; one "not run" row per claim without pairs."""
    blank = list(expected.datasets.get("blank", ()))
    scores = _clustering_note(clustering)
    rows = []
    for statistic, (claim, judge, study, same) in PAIR_CLAIMS.items():
        mine = pairs[pairs["statistic"] == statistic] if pairs is not None else pd.DataFrame()
        if mine.empty:
            why = _family_shortfall(expected) or _pair_shortfall(blank, expected.families)
            rows.append(_row(claim, ", ".join(blank) or "all", NATS, V.not_run(why), study=study, note=scores))
            continue
        for rec in mine.to_dict("records"):
            gap, n = _interval(rec, "gap", "gap_low", "gap_high"), int(rec["n_samples"])
            verdict = judge(gap, n_samples=n, nearest=_text(rec["nearest"]))
            if int(rec["n_other"]) == 0:
                verdict = V.not_run(f"only family {rec['family']} on 'blank': no other family to compare with")
            note = f"{same.format(**rec)} = {float(rec['same']):.3f} nats"
            if _text(rec["nearest"]):
                note += f"; nearest other family: {rec['nearest']} at {float(rec['nearest_value']):.3f} nats"
            rows.append(
                _row(
                    claim,
                    f"{rec['small']}, {rec['large']}",
                    NATS,
                    verdict,
                    split="blank",
                    measure="shannon",
                    ours=gap,
                    study=study,
                    n=n,
                    n_sources=n,
                    note="; ".join(t for t in (note, scores) if t),
                )
            )
    return rows


def _clustering_note(clustering: pd.DataFrame | None) -> str:
    """The clustering scores (ARI, silhouette), descriptive: they carry no interval."""
    if clustering is None or clustering.empty:
        return ""
    by = clustering.set_index("grouping")
    return "; ".join(
        f"{g}: ARI {_score(by.loc[g, 'ari_models'])}, silhouette {_score(by.loc[g, 'silhouette_samples'])}"
        for g in by.index
    )


def _pair_shortfall(models: Sequence[str], families: Mapping[str, str]) -> str:
    """Why no same-family pair was compared (more prompts would not change it)."""
    counts = pd.Series([families.get(m, "") for m in models]).value_counts()
    if counts.empty or counts.max() < 2:
        return "one model per family: family and model identity coincide, so size cannot be told apart (make families)"
    if counts.size < 2:
        return f"only family {counts.index[0]} on 'blank': no other family to compare with"
    return "no two models of one family with different layer counts on 'blank'"


def _score(value: float) -> str:
    return "n/a" if pd.isna(value) else f"{value:.2f}"


# --------------------------------------------------------------------------- absences


def _absent_rows(rows: list[dict[str, Any]], expected: Expected) -> list[dict[str, Any]]:
    """A row for every claim and model the configuration did not measure, saying why."""
    seen = {(r["claim"], r["model"]) for r in rows}
    models = list(dict.fromkeys(m for ms in expected.datasets.values() for m in ms))
    out = []
    for target, claim in KNN_CLAIMS.items():
        dataset = KNN_DATASETS[target]
        profiled = list(expected.datasets.get(dataset, ()))
        wanted = [POOLED_MODEL] if target == "family" else profiled if target in EXTENSION_TARGETS else models
        for model in wanted:
            if (claim, model) in seen:
                continue
            out.append(_row(claim, model, AUC, V.not_run(_why_absent(dataset, model, profiled, target))))
    for claim in (SKIP_RANDOM, SKIP_PRUNING):
        for model in models:
            if (claim, model) not in seen:
                reason = (
                    "the layer-skip experiment is off"
                    if not expected.layer_skip
                    else ("not in layer_skip.models" if model not in expected.layer_skip else "no result")
                )
                out.append(_row(claim, model, POINTS, V.not_run(reason)))
    return out + _absent_pair_rows(seen, expected) + _absent_shape_rows(seen, models, expected)


def _absent_pair_rows(seen: set[tuple[str, str]], expected: Expected) -> list[dict]:
    """A "not run" row for each same-family pair claim with no row (no family analysis ran)."""
    blank = list(expected.datasets.get("blank", ()))
    why = _family_shortfall(expected) or "no result"
    return [
        _row(claim, ", ".join(blank) or "all", NATS, V.not_run(why))
        for claim in (CLUSTERING, SIZE_RESOLUTION)
        if not any(c == claim for c, _ in seen)
    ]


def _absent_shape_rows(seen: set[tuple[str, str]], profiled: Sequence[str], expected: Expected) -> list[dict]:
    """A "not run" row for each shape claim without a model of its family, or a family model without a result."""
    out = []
    for key, claim in SHAPE_ROWS.items():
        members = [m for m, family in expected.families.items() if shape_claim(str(family)) == key]
        if not members:
            names = " or ".join(SHAPE_FAMILIES[key])
            out.append(_row(claim, "none", NATS, V.not_run(f"no model of family {names} in this configuration")))
        for model in members:
            if (claim, model) not in seen:
                reason = "no result" if model in profiled else f"{model} is profiled on no dataset"
                out.append(_row(claim, model, NATS, V.not_run(reason)))
    return out


def _family_shortfall(expected: Expected) -> str:
    """Why the family analyses of blank prompts cannot run, or ``""`` when they can."""
    blank = expected.datasets.get("blank")
    if not blank:
        return "dataset 'blank' is disabled"
    return f"needs >= 2 models on 'blank', got {len(blank)}" if len(blank) < 2 else ""


def _why_absent(dataset: str, model: str, profiled: Sequence[str], target: str) -> str:
    if not profiled:
        return f"dataset {dataset!r} is disabled"
    if target == "family":
        return f"needs >= 2 models on {dataset!r}, got {len(profiled)}"
    if model not in profiled:
        return f"{model} is not profiled on {dataset!r} (datasets.{dataset}.models)"
    return "no result"


# --------------------------------------------------------------------------- the table


def paper_table(
    *,
    knn: pd.DataFrame | None = None,
    accuracy: pd.DataFrame | None = None,
    expansion: pd.DataFrame | None = None,
    overlap: pd.DataFrame | None = None,
    clustering: pd.DataFrame | None = None,
    layer_skip: pd.DataFrame | None = None,
    shapes: pd.DataFrame | None = None,
    family_pairs: pd.DataFrame | None = None,
    expected: Expected | None = None,
) -> pd.DataFrame:
    """Every claim with our estimate, its interval, the study's figure and a verdict.

    Args:
        knn: :func:`~entropy_lens.analysis.knn.knn_table` output (both protocols).
        accuracy: :func:`entropy_lens.answers.scoring.accuracy_table` output.
        expansion: :func:`~entropy_lens.analysis.expansion.expansion_spearman` rows, with a
            ``dataset`` column when several datasets are stacked.
        overlap: :func:`~entropy_lens.analysis.expansion.nucleus_overlap` rows (``dataset`` as above).
        clustering: :func:`~entropy_lens.analysis.families.clustering_scores` output.
        layer_skip: :func:`entropy_lens.answers.accuracy.skip_differences` rows with a ``model`` column.
        shapes: :func:`~entropy_lens.analysis.shapes.profile_shapes` rows (``dataset`` as above).
        family_pairs: :func:`~entropy_lens.analysis.pairs.family_pairs` rows (the family and
            size-resolution claims; ``clustering`` scores join their note).
        expected: What the configuration asked for (absent claims get a "not run" row).

    Returns:
        Frame with :data:`COLUMNS`; intervals are numbers in the row's ``unit`` scale
        of 0-1 (AUC, accuracy) or -1..1 (rho).
    """
    expected = expected or Expected()
    rows: list[dict[str, Any]] = []
    rows += _knn_rows(knn, accuracy, expected) if knn is not None else []
    rows += _renyi_rows(rows)
    rows += _spearman_rows(expansion) if expansion is not None else []
    rows += _accuracy_rows(accuracy, expected.families) if accuracy is not None else []
    rows += _skip_rows(layer_skip, expected.families) if layer_skip is not None else []
    if clustering is not None or family_pairs is not None:
        rows += _pair_rows(family_pairs, clustering, expected)
    rows += _overlap_rows(overlap) if overlap is not None else []
    rows += _shape_rows(shapes, expected.families) if shapes is not None else []
    rows += _absent_rows(rows, expected) if expected.datasets else []
    return _ordered(pd.DataFrame(rows, columns=list(COLUMNS)))


CLAIM_ORDER = (
    TASK,
    SCRAMBLED,
    FORMAT,
    FAMILY,
    IMAGE_CLASS,
    SPEARMAN,
    OVERLAP,
    MMLU_CORRECT,
    SKIP_RANDOM,
    SKIP_PRUNING,
    RENYI,
    CLUSTERING,
    SIZE_RESOLUTION,
    SHAPE_GPT,
    SHAPE_LLAMA,
    ACCURACY,
)


def _ordered(table: pd.DataFrame) -> pd.DataFrame:
    rank = {claim: i for i, claim in enumerate(CLAIM_ORDER)}
    order = table["claim"].map(rank).fillna(len(rank))
    return table.assign(_o=order).sort_values(["_o"], kind="stable").drop(columns="_o").reset_index(drop=True)


def headline(table: pd.DataFrame) -> pd.DataFrame:
    """The rows a reader needs first, one per claim and model, in claim order: findings
    measured, findings the configuration did not run, then preconditions.

    Shannon entropy for separability; MMLU pooled over styles (correctness and accuracy)
    under the verdict measure; layer skipping at the smallest ``k`` (the study's headline
    skips one layer).  Per-style, per-order and larger-``k`` rows stay in the full table;
    rows without a verdict are left out.
    """
    claim, measure, split = table["claim"], table["measure"], table["split"]
    keep = table["verdict"] != ""
    keep &= ~claim.isin(KNN_CLAIMS.values()) | measure.isin(["shannon", ""])
    keep &= ~claim.isin([MMLU_CORRECT, ACCURACY]) | split.isin([ALL_STYLES, ""]) | ~_has_pooled(table)
    keep &= ~claim.isin([ACCURACY, SKIP_RANDOM, SKIP_PRUNING]) | measure.isin([VERDICT_MEASURE, ""])
    skip_ks = split.where(claim.isin([SKIP_RANDOM, SKIP_PRUNING]) & split.str.startswith("k=")).dropna()
    if not skip_ks.empty:
        smallest = min(skip_ks, key=lambda text: int(text[2:]))
        keep &= ~claim.isin([SKIP_RANDOM, SKIP_PRUNING]) | split.isin([smallest, ""])
    top = table[keep]
    not_run = top["why"].str.startswith(NOT_RUN)
    precondition = top["role"] == PRECONDITION
    return pd.concat(
        [top[~not_run & ~precondition], top[not_run & ~precondition], top[precondition]], ignore_index=True
    )


def _has_pooled(table: pd.DataFrame) -> pd.Series:
    """Per row: whether its (claim, model) has a row pooled over MMLU styles."""
    pooled = {(c, m) for c, m, s in zip(table["claim"], table["model"], table["split"], strict=True) if s == ALL_STYLES}
    return pd.Series([(c, m) in pooled for c, m in zip(table["claim"], table["model"], strict=True)], index=table.index)


def display(table: pd.DataFrame) -> pd.DataFrame:
    """Strings for reading: ``ours``, ``baseline`` and ``study protocol`` as ``x [lo, hi]`` in the row's unit."""
    claims = table["claim"].where(table["role"] != PRECONDITION, table["claim"] + f" ({PRECONDITION})")
    out = pd.DataFrame(
        {
            "claim": claims,
            "model": table["model"],
            "split": table["split"],
            "measure": table["measure"],
            "ours (95% CI)": [_fmt(r, "estimate", "ci") for r in table.to_dict("records")],
            "baseline": [_fmt(r, "baseline", "baseline") for r in table.to_dict("records")],
            "study protocol": [_fmt(r, "study_protocol", "study_protocol") for r in table.to_dict("records")],
            "study": table["study"],
            "verdict": table["verdict"],
            "why": table["why"],
            "n": table["n"],
        }
    )
    return out


def _fmt(row: Mapping[str, Any], value: str, prefix: str) -> str:
    estimate = row[value]
    if estimate == "" or pd.isna(estimate):
        return ""
    scale = SCALES.get(row["unit"], 1.0)
    digits = 3 if row["unit"] in (RHO, JACCARD, NATS) else 1
    lo, hi = row[f"{prefix}_low"], row[f"{prefix}_high"]
    text = f"{float(estimate) * scale:.{digits}f}"
    if lo != "" and pd.notna(lo) and pd.notna(hi):
        text += f" [{float(lo) * scale:.{digits}f}, {float(hi) * scale:.{digits}f}]"
    return text + (f" {row['unit']}" if row["unit"] and row["unit"] != RHO else "")


def paper_table_from_files(paths: Mapping[str, str | Sequence[str]], expected: Expected) -> pd.DataFrame:
    """:func:`paper_table` from the analysis tables on disk.

    Args:
        paths: Keyword of :func:`paper_table` -> a CSV path, or several to stack (the
            per-dataset expansion and overlap tables).
        expected: What the configuration asked for.
    """
    unknown = sorted(set(paths) - set(TABLE_INPUTS))
    if unknown:
        raise ValueError(f"unknown paper-table inputs {unknown}; expected some of {list(TABLE_INPUTS)}")
    tables = {name: _read_csvs(value) for name, value in paths.items()}
    return paper_table(**tables, expected=expected)


TABLE_INPUTS = ("knn", "accuracy", "expansion", "overlap", "clustering", "layer_skip", "shapes", "family_pairs")


def _read_csvs(value: str | Sequence[str]) -> pd.DataFrame:
    files = [value] if isinstance(value, str) else list(value)
    return pd.concat([pd.read_csv(f, keep_default_na=True) for f in files], ignore_index=True)


VERDICT_COLOURS = {V.REPRODUCED: "#1a7f37", V.NOT_REPRODUCED: "#cf222e", V.INCONCLUSIVE: "#9a6700"}
HTML_STYLE = """<style>
.prose.max-w-lg{max-width:none !important}
.h-screen.items-center{align-items:flex-start !important}
table.verdicts{border-collapse:collapse;font-size:13px;margin:8px 0 16px 0}
table.verdicts th,table.verdicts td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
table.verdicts th{background:#f6f8fa}
table.verdicts td.why{max-width:460px;color:#444}
span.verdict{color:#fff;border-radius:10px;padding:1px 8px;white-space:nowrap;font-weight:600}
</style>"""


# How a precondition's verdict reads: it is met or not, not reproduced.
PRECONDITION_WORDS = {V.REPRODUCED: "met", V.NOT_REPRODUCED: "not met", V.INCONCLUSIVE: "undecided"}
PRECONDITION_HEADING = "Preconditions: do the models know MMLU?"
PRECONDITION_TEXT = (
    "not findings of the study: MMLU correctness and layer skipping can only be read on a model that answers "
    "above chance and the majority letter"
)


def summary(table: pd.DataFrame) -> list[str]:
    """The headline's counts: findings (measured, then not run) and preconditions, apart.

    Args:
        table: :func:`headline` rows.

    Returns:
        Two sentences: the findings' verdict counts, and the preconditions' (met, not met,
        undecided) with what they are for.
    """
    findings, preconditions = _split(table)
    not_run = findings["why"].str.startswith(NOT_RUN)
    counts = findings.loc[~not_run, "verdict"].value_counts()
    first = "Claims of the study: " + ", ".join(f"{int(counts.get(v, 0))} {v}" for v in V.VERDICTS)
    first += f"; {int(not_run.sum())} not run by this configuration (listed last)" if not_run.any() else ""
    met = preconditions["verdict"].value_counts()
    second = "Preconditions: " + ", ".join(f"{int(met.get(v, 0))} {w}" for v, w in PRECONDITION_WORDS.items())
    return [first + ".", f"{second} ({PRECONDITION_TEXT})."]


def _split(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    precondition = table["role"] == PRECONDITION
    return table[~precondition], table[precondition]


def verdicts_markdown(table: pd.DataFrame, title: str) -> str:
    """The headline as Markdown: the counts, the findings' table, then the preconditions' table."""
    findings, preconditions = _split(table)
    text = f"# {title}\n\n" + "".join(f"**{line}**\n\n" for line in summary(table)) + to_markdown(display(findings))
    if not preconditions.empty:
        text += f"\n## {PRECONDITION_HEADING}\n\n{to_markdown(display(preconditions))}"
    return text


VERDICT_COLOURS = {V.REPRODUCED: "#1a7f37", V.NOT_REPRODUCED: "#cf222e", V.INCONCLUSIVE: "#9a6700"}
HTML_STYLE = """<style>
.prose.max-w-lg{max-width:none !important}
.h-screen.items-center{align-items:flex-start !important}
table.verdicts{border-collapse:collapse;font-size:13px;margin:8px 0 16px 0}
table.verdicts th,table.verdicts td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
table.verdicts th{background:#f6f8fa}
table.verdicts td.why{max-width:460px;color:#444}
span.verdict{color:#fff;border-radius:10px;padding:1px 8px;white-space:nowrap;font-weight:600}
</style>"""
# The headline holds one measure per claim (the README says which); n is in the full table.
HTML_HIDDEN = ("n", "measure")


def verdicts_html(table: pd.DataFrame) -> str:
    """The headline as a styled HTML fragment (coloured verdicts) for the report's first page:
    the counts, the findings' table, then the preconditions' table."""
    findings, preconditions = _split(table)
    lines = "<br>".join(html.escape(line) for line in summary(table))
    text = f"{HTML_STYLE}\n<p><b>{lines}</b><br>(95% intervals; rules in the README, section Verdict rules)</p>\n"
    text += _html_table(findings)
    if not preconditions.empty:
        text += f"<h4>{html.escape(PRECONDITION_HEADING)}</h4>\n" + _html_table(preconditions)
    return text


def _html_table(table: pd.DataFrame) -> str:
    view = display(table)
    header = "".join(f"<th>{html.escape(c)}</th>" for c in view.columns if c not in HTML_HIDDEN)
    rows = []
    for rec in view.to_dict("records"):
        cells = []
        for column, value in rec.items():
            if column in HTML_HIDDEN:
                continue
            text = html.escape(str(value))
            if column == "verdict" and value:
                text = f'<span class="verdict" style="background:{VERDICT_COLOURS[value]}">{text}</span>'
            cells.append(f'<td class="{"why" if column == "why" else ""}">{text}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    body = "\n".join(rows)
    return f'<table class="verdicts"><thead><tr>{header}</tr></thead><tbody>\n{body}\n</tbody></table>\n'
