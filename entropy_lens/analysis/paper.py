"""The paper comparison table: the study's figures beside ours, one row per claim.

Our numbers come from the analysis tables (:func:`entropy_lens.analysis.knn.knn_table`,
:func:`~entropy_lens.analysis.expansion.expansion_spearman`,
:func:`~entropy_lens.analysis.expansion.nucleus_overlap`,
:func:`~entropy_lens.analysis.families.clustering_scores`, :func:`mmlu_accuracy`).
A model of ours is matched to a study model by name (:func:`study_model_for`); where no
study model matches, the row shows the study's figure range over its own models and
says in ``note`` that the models differ.  AUCs and accuracies are in percent, as the
study reports them.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from entropy_lens import schema
from entropy_lens.analysis.expansion import STUDY_SPEARMAN
from entropy_lens.analysis.features import plain

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
# Lower-case name prefixes (after any ``org/``) that identify a study model.
STUDY_MODEL_ALIASES: dict[str, tuple[str, ...]] = {
    "Gemma-2-2B": ("gemma-2-2b",),
    "Gemma-2-9B": ("gemma-2-9b",),
    "Llama-3.2-1B": ("llama-3.2-1b",),
    "Llama-3.2-3B": ("llama-3.2-3b",),
    "Llama-3-8B": ("llama-3-8b", "meta-llama-3-8b"),
    "Phi-3-mini": ("phi-3-mini", "phi-3"),
}
# Target names of :data:`entropy_lens.analysis.knn.STUDY_TARGETS`.
TASK, TASK_SCRAMBLED, FORMAT, MMLU_CORRECT, FAMILY_TARGET = "task", "task_scrambled", "format", "mmlu_correct", "family"
COLUMNS = ("claim", "measure", "split", "model", "study_model", "study", "ours", "note")
NO_FIGURE = "—"
PERCENT = 100.0


def study_model_for(model: str) -> str | None:
    """The study model that ``model`` (a config name or hub id) is, or ``None``."""
    name = model.rsplit("/", 1)[-1].lower()
    for study, prefixes in STUDY_MODEL_ALIASES.items():
        for prefix in prefixes:
            rest = name[len(prefix) :]
            if name.startswith(prefix) and (not rest or not rest[0].isalnum()):
                return study
    return None


def _pm(mean: float, std: float, scale: float = PERCENT) -> str:
    if mean is None or not math.isfinite(mean):
        return "n/a"
    return f"{mean * scale:.2f} ± {std * scale:.2f}" if math.isfinite(std) else f"{mean * scale:.2f}"


def _range(values: Sequence[float], spec: str = ".2f") -> str:
    return f"{min(values):{spec}}–{max(values):{spec}}"


def _row(claim: str, model: str, ours: str, study: str, matched: str | None, **extra: str) -> dict[str, str]:
    if matched is None and study != NO_FIGURE:
        note = "models differ: the study figure is its range over its own models"
    elif matched is None:
        note = "no study figure for this claim"
    else:
        note = ""
    row = {"claim": claim, "model": model, "study_model": matched or "", "study": study, "ours": ours, "note": note}
    return {"measure": "", "split": "", **row, **extra}


def _knn_rows(knn: pd.DataFrame, target: str, claim: str, study_of) -> list[dict[str, str]]:
    rows = []
    for rec in knn[knn["target"] == target].itertuples(index=False):
        matched, study = study_of(str(rec.model), rec)
        ours = _pm(rec.auc_mean, rec.auc_std) + f" (dummy {_pm(rec.dummy_mean, rec.dummy_std)})"
        rows.append(
            _row(claim, str(rec.model), ours, study, matched, measure=str(rec.measure), split=_fmt(rec.split, "g"))
        )  # empty CSV field: NaN -> ""
    return rows


def _task_study(model: str, rec) -> tuple[str | None, str]:
    matched = study_model_for(model)
    if rec.metric != schema.ENTROPY:
        return matched, NO_FIGURE
    if matched in STUDY_TASK_AUC:
        return matched, f"{STUDY_TASK_AUC[matched]:.2f}"
    return None, _range(list(STUDY_TASK_AUC.values()))


def _format_study(model: str, rec) -> tuple[str | None, str]:
    matched = study_model_for(model)
    if rec.metric != schema.ENTROPY:
        return matched, NO_FIGURE
    if matched in STUDY_FORMAT_AUC:
        mean, std = STUDY_FORMAT_AUC[matched]
        return matched, f"{mean:.1f} ± {std:.1f}"
    return None, _range([m for m, _ in STUDY_FORMAT_AUC.values()])


def _no_study(model: str, rec) -> tuple[str | None, str]:
    return None, NO_FIGURE


def _family_range(table: dict[str, tuple[float, float]], family: str) -> str:
    if family.lower() in table:
        return f"{_range(table[family.lower()])} ({family.lower()} family)"
    return NO_FIGURE


def _mmlu_auc_rows(knn: pd.DataFrame, families: dict[str, str]) -> list[dict[str, str]]:
    def study_of(model: str, rec) -> tuple[str | None, str]:
        if rec.metric != schema.ENTROPY:
            return study_model_for(model), NO_FIGURE
        return study_model_for(model), _family_range(STUDY_MMLU_AUC, families.get(model, ""))

    return _knn_rows(knn, MMLU_CORRECT, "MMLU correctness kNN AUC", study_of)


def _accuracy_rows(accuracy: pd.DataFrame) -> list[dict[str, str]]:
    rows = []
    for rec in accuracy.itertuples(index=False):
        study = _family_range(STUDY_MMLU_ACCURACY, str(rec.family))
        ours = f"{rec.accuracy * PERCENT:.2f} (n={rec.n})"
        rows.append(
            _row("MMLU accuracy", str(rec.model), ours, study, study_model_for(str(rec.model)), split=str(rec.style))
        )
    return rows


def _spearman_rows(expansion: pd.DataFrame) -> list[dict[str, str]]:
    rows = []
    for rec in expansion.itertuples(index=False):
        matched = study_model_for(str(rec.model))
        if matched in STUDY_SPEARMAN:
            study = f"{STUDY_SPEARMAN[matched]:.4f}"
        else:
            matched, study = None, _range(list(STUDY_SPEARMAN.values()), ".4f")
        ours = f"{rec.spearman:.4f} (n={rec.n})"
        rows.append(_row("Spearman ΔH vs Δ nucleus size", str(rec.model), ours, study, matched))
    return rows


def _overlap_rows(overlap: pd.DataFrame) -> list[dict[str, str]]:
    rows = []
    for rec in overlap.itertuples(index=False):
        ours = f"mean {rec.mean:.3f} (median {getattr(rec, 'q50', float('nan')):.3f}, n={rec.n})"
        rows.append(_row("adjacent-layer nucleus Jaccard", str(rec.model), ours, NO_FIGURE, None))
    return rows


def _score(value: float) -> str:
    return "n/a" if pd.isna(value) else f"{value:.2f}"


def _clustering_rows(clustering: pd.DataFrame, models: str) -> list[dict[str, str]]:
    by = clustering.set_index("grouping")
    parts = [
        f"{g}: ARI {_score(by.loc[g, 'ari_models'])}, silhouette {_score(by.loc[g, 'silhouette_samples'])}"
        for g in by.index
    ]
    row = _row("family clustering (blank prompts)", models, "; ".join(parts), STUDY_FAMILY_CLAIM, None)
    row["note"] = (
        "study claim is qualitative; ours: ARI over models, silhouette over samples "
        "(n/a: one group, or one model per group)"
    )
    return [row]


def paper_table(
    *,
    knn: pd.DataFrame | None = None,
    accuracy: pd.DataFrame | None = None,
    expansion: pd.DataFrame | None = None,
    overlap: pd.DataFrame | None = None,
    clustering: pd.DataFrame | None = None,
    layer_skip: pd.DataFrame | None = None,
    families: dict[str, str] | None = None,
) -> pd.DataFrame:
    """One row per claim and model: study figure, ours, and a note when models differ.

    Args:
        knn: :func:`~entropy_lens.analysis.knn.knn_table` output (targets ``task``,
            ``task_scrambled``, ``format``, ``mmlu_correct``, ``family``).
        accuracy: :func:`mmlu_accuracy` output.
        expansion: :func:`~entropy_lens.analysis.expansion.expansion_spearman` output.
        overlap: :func:`~entropy_lens.analysis.expansion.nucleus_overlap` output.
        clustering: :func:`~entropy_lens.analysis.families.clustering_scores` output.
        layer_skip: Layer-skip accuracies (``model, condition, kind, k, accuracy, ci_low,
            ci_high, chance``; group ``all``) from the layer-skip rules.
        families: Model -> family, to pick the study's MMLU range (default: from
            ``accuracy``/``expansion`` rows).

    Returns:
        Frame with :data:`COLUMNS` (all strings); inputs left ``None`` add no rows.
    """
    families = {**_families_from(accuracy, expansion), **(families or {})}
    rows: list[dict[str, str]] = []
    if knn is not None:
        rows += _knn_rows(knn, TASK, "task kNN AUC (intact prompts)", _task_study)
        rows += _knn_rows(knn, TASK_SCRAMBLED, "task kNN AUC (scrambled control)", _no_study)
        rows += _knn_rows(knn, FORMAT, "format kNN AUC", _format_study)
        rows += _mmlu_auc_rows(knn, families)
        rows += _knn_rows(knn, FAMILY_TARGET, "family kNN AUC (blank prompts)", _no_study)
    rows += _accuracy_rows(accuracy) if accuracy is not None else []
    rows += _spearman_rows(expansion) if expansion is not None else []
    rows += _overlap_rows(overlap) if overlap is not None else []
    if clustering is not None:
        rows += _clustering_rows(clustering, ", ".join(sorted(families)) or "all")
    rows += _skip_rows(layer_skip) if layer_skip is not None else []
    return pd.DataFrame(rows, columns=list(COLUMNS))


STUDY_SKIP_CLAIM = {
    "llama": "skipping the largest-expansion layer collapses Llama to chance (25%)",
    "gemma": "Gemma-2-2B-it is the exception: pruning layers matter more",
}


def _skip_rows(layer_skip: pd.DataFrame) -> list[dict[str, str]]:
    """One row per model: accuracy intact vs skipping the largest-expansion / -pruning layer."""
    rows = []
    for model, grp in layer_skip.groupby("model", sort=False):
        acc = {c: grp.loc[grp["condition"] == c, "accuracy"] for c in ("intact", "expansion_k1", "pruning_k1")}
        if any(v.empty for v in acc.values()):
            continue
        rand = grp.loc[(grp["kind"] == "random") & (grp["k"] == 1), "accuracy"]
        ours = (
            f"intact {acc['intact'].iloc[0] * PERCENT:.1f}, expansion {acc['expansion_k1'].iloc[0] * PERCENT:.1f}, "
            f"pruning {acc['pruning_k1'].iloc[0] * PERCENT:.1f}, random {rand.mean() * PERCENT:.1f} "
            f"(chance {grp['chance'].iloc[0] * PERCENT:.0f})"
        )
        family = str(grp["family"].iloc[0]) if "family" in grp else ""
        study = STUDY_SKIP_CLAIM.get(family, NO_FIGURE)
        rows.append(
            _row("skip the largest-expansion layer (MMLU %)", str(model), ours, study, study_model_for(str(model)))
        )
    return rows


def _families_from(*frames: pd.DataFrame | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for frame in frames:
        if frame is not None and {"model", "family"} <= set(frame.columns):
            out.update(zip(frame["model"].astype(str), frame["family"].astype(str), strict=True))
    return out


def mmlu_accuracy(ds: xr.Dataset, *, variable: str = "correct_ll", split_by: str | None = "style") -> pd.DataFrame:
    """Accuracy per model (and style) from a 1/0 correctness variable; negatives are unparsed.

    Args:
        ds: Combined MMLU store with ``variable`` on ``(model, prompt)``.
        variable: ``correct_ll`` (letter log-likelihood) or ``correct_parsed``.
        split_by: Prompt coordinate to split by (``None``: one row per model).

    Returns:
        ``model, family, style, n, n_unparsed, accuracy`` (accuracy over parsed answers, 0..1).
    """
    if variable not in ds.data_vars:
        raise ValueError(f"variable {variable!r} is not in the store; variables: {list(ds.data_vars)}")
    values = np.asarray(ds[variable].transpose(schema.MODEL, schema.PROMPT).values)
    splits = plain(ds[split_by].values) if split_by else np.full(values.shape[1], "", dtype=object)
    rows = []
    for i, model in enumerate(ds.indexes[schema.MODEL]):
        family = str(ds[schema.FAMILY].values[i]) if schema.FAMILY in ds.coords else ""
        for split in pd.unique(splits):
            cells = values[i, splits == split]
            parsed = cells[cells >= 0]
            acc = float(parsed.mean()) if parsed.size else float("nan")
            rows.append(
                {
                    "model": str(model),
                    "family": family,
                    "style": str(split),
                    "n": int(parsed.size),
                    "n_unparsed": int((cells < 0).sum()),
                    "accuracy": acc,
                }
            )
    return pd.DataFrame(rows)


def to_markdown(df: pd.DataFrame, *, float_format: str = ".4g") -> str:
    """Render ``df`` as a GitHub-flavoured Markdown table (no index; NaN as blank).

    Args:
        df: Any frame.
        float_format: Format spec for float cells.

    Returns:
        The table text, ending with a newline.
    """
    header = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(_md_cell(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for rec in df.itertuples(index=False):
        lines.append("| " + " | ".join(_md_cell(_fmt(v, float_format)) for v in rec) + " |")
    return "\n".join(lines) + "\n"


def _fmt(value: object, float_format: str) -> str:
    if value is None or (np.isscalar(value) and pd.isna(value)):
        return ""
    if isinstance(value, (float, np.floating)):
        return format(float(value), float_format)
    return str(value)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
