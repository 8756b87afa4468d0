"""Do the verdicts survive a lens fitted to the model?

The analyses that give the paper table under the logit lens give a second table when they read profiles
extracted under a fitted lens (``linear`` or ``tuned``, :mod:`entropy_lens.lens.translators`).
:func:`verdict_changes` puts each row's two verdicts side by side, :func:`robustness_headline` counts how
many change, and :func:`block_differences` / :func:`driving_blocks` name the blocks where the two lenses'
entropies differ most for a changed row's model and dataset: the prompt's mean over its tokens, compared
per block, with a 95% interval over prompts (the unit: a prompt's tokens are not independent).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from entropy_lens.analysis.depth import DEFAULT_GRID_POINTS
from entropy_lens.analysis.features import FeatureSettings
from entropy_lens.analysis.separability.settings import KnnSettings
from entropy_lens.core.intervals import bootstrap_mean_statistic
from entropy_lens.store import schema
from entropy_lens.store.combine import combine_dataset
from entropy_lens.verdicts.inputs import StoreSettings
from entropy_lens.verdicts.mechanical import mark_mechanical, true_rates
from entropy_lens.verdicts.render import NOT_RUN, UNDER_LENS
from entropy_lens.verdicts.rows import Expected
from entropy_lens.verdicts.table import headline, paper_table, store_tables

# A row is the same row under two lenses when these agree (its claim by id; the name rides along).
KEY = ("claim_id", "role", "model", "split", "measure", "unit")
NUMBERS = ("estimate", "ci_low", "ci_high")
CHANGE_COLUMNS = (
    "claim",
    *KEY,
    "kind",
    "verdict_logit",
    *(f"{c}_logit" for c in NUMBERS),
    "verdict_lens",
    *(f"{c}_lens" for c in NUMBERS),
    "changed",
)
BLOCK_COLUMNS = ("block", "depth", "difference", "ci_low", "ci_high", "n_prompts")


def verdict_changes(logit: pd.DataFrame, lens: pd.DataFrame, kind: str) -> pd.DataFrame:
    """The rows decided under both lenses, each with its two verdicts and estimates and whether they differ.

    A row counts where both tables give it a verdict that was measured (a "not run" row, or a row without a
    verdict, is left out: it says nothing about the lens).

    Args:
        logit: The paper table under the logit lens (:func:`entropy_lens.verdicts.table.paper_table`).
        lens: The paper table of the same analyses under the fitted lens.
        kind: The fitted lens's kind (a label of the rows).

    Raises:
        ValueError: for a table without the key columns, or one that gives a key twice.
    """
    sides = {"logit": logit, "lens": lens}
    for name, table in sides.items():
        missing = sorted({"claim", *KEY, "verdict", "why", *NUMBERS} - set(table.columns))
        if missing:
            raise ValueError(f"the {name} paper table lacks the columns {missing}")
        twice = table[table.duplicated(list(KEY), keep=False)]
        if not twice.empty:
            raise ValueError(f"the {name} paper table gives a row twice: {twice.iloc[0][list(KEY)].to_dict()}")
    measured = [_measured(table, name) for name, table in sides.items()]
    joined = measured[0].merge(measured[1].drop(columns="claim"), on=list(KEY), how="inner")
    joined.insert(len(KEY), "kind", kind)
    joined["changed"] = joined["verdict_logit"] != joined["verdict_lens"]
    return joined[list(CHANGE_COLUMNS)].reset_index(drop=True)


def _measured(table: pd.DataFrame, side: str) -> pd.DataFrame:
    decided = (table["verdict"].astype(str) != "") & ~table["why"].astype(str).str.startswith(NOT_RUN)
    renamed = {c: f"{c}_{side}" for c in ("verdict", *NUMBERS)}
    return table.loc[decided, ["claim", *KEY, "verdict", *NUMBERS]].rename(columns=renamed)


def robustness_headline(changes: pd.DataFrame, kind: str) -> str:
    """One line: how many of the verdicts read under both lenses change under ``kind``, and which.

    Where ``changes`` marks the rows the verdict table shows (a boolean ``headline`` column: the statistic and
    scale each claim's verdict is read on), the line counts and lists those, and adds how many of all the rows
    (every statistic and scale) change."""
    if changes.empty:
        return f"No verdict was read under the {kind} lens."
    every = changes
    if "headline" in changes.columns:
        changes = changes[_flag(changes["headline"])]
    changed = changes[_flag(changes["changed"])]
    head = f"Under the {kind} lens, {len(changed)} of {len(changes)} verdicts change"
    if every is not changes:
        moved = int(_flag(every["changed"]).sum())
        head += f" ({moved} of {len(every)} rows on every statistic and scale)"
    if changed.empty:
        return head + "."
    listed = "; ".join(
        f"{r.claim} ({r.model}{', ' + r.split if r.split else ''}): {r.verdict_logit} → {r.verdict_lens}"
        for r in changed.itertuples()
    )
    return f"{head}: {listed}."


def _flag(column: pd.Series) -> pd.Series:
    """A boolean column, in memory or read back from a CSV (``True`` / ``False`` as text)."""
    return column.astype(str).isin(["True", "true", "1"])


def robustness_lines(changes: pd.DataFrame, kinds: Sequence[str] | None = None) -> list[str]:
    """:func:`robustness_headline` of each kind (default: those of ``changes``, in order of appearance)."""
    kinds = list(dict.fromkeys(changes["kind"])) if kinds is None else list(kinds)
    return [robustness_headline(changes[changes["kind"] == kind], kind) for kind in kinds]


def block_differences(logit: np.ndarray, lens: np.ndarray, *, n_boot: int, seed: int) -> pd.DataFrame:
    """Per block, the mean entropy under the fitted lens minus under the logit lens (nats).

    Args:
        logit, lens: ``[prompt, token, layer]`` entropies of the same prompts and tokens under each lens,
            NaN where a prompt has no token (generation stopped).
        n_boot, seed: Bootstrap replicates over prompts and their seed.

    Returns:
        One row per block: the difference of the prompts' token means, averaged over prompts, its 95%
        interval over prompts and the prompts counted (those with a token under both lenses).

    Raises:
        ValueError: for arrays of different shapes, not 3-D, or whose missing tokens differ.
    """
    logit, lens = np.asarray(logit, dtype=np.float64), np.asarray(lens, dtype=np.float64)
    if logit.shape != lens.shape or logit.ndim != 3:
        raise ValueError(
            f"entropies must be two [prompt, token, layer] arrays of one shape, got {logit.shape}, {lens.shape}"
        )
    if not np.array_equal(np.isnan(logit), np.isnan(lens)):
        raise ValueError("the two lenses' entropies are missing at different tokens: they read different generations")
    present = ~np.isnan(logit).all(axis=(1, 2))
    if not present.any():
        raise ValueError("no prompt has a token under both lenses")
    with np.errstate(invalid="ignore"):
        rows = np.nanmean(lens[present] - logit[present], axis=1)  # [prompt, layer]
    low, high = bootstrap_mean_statistic(rows, lambda means: means, n_boot=n_boot, seed=seed)
    n_layers = rows.shape[1]
    return pd.DataFrame(
        {
            "block": np.arange(n_layers),
            "depth": (np.arange(n_layers) + 1) / n_layers,
            "difference": rows.mean(axis=0),
            "ci_low": low,
            "ci_high": high,
            "n_prompts": int(present.sum()),
        },
        columns=list(BLOCK_COLUMNS),
    )


def driving_blocks(differences: pd.DataFrame, top: int = 3) -> str:
    """The ``top`` blocks whose entropy moves most between the lenses, among those whose interval
    excludes 0, for a changed row's ``why`` (e.g. ``blocks 11 (+6.2 [5.9, 6.5] nats), 10 (...)``)."""
    if top < 1:
        raise ValueError(f"top must be at least 1, got {top}")
    clear = differences[(differences["ci_low"] > 0) | (differences["ci_high"] < 0)]
    if clear.empty:
        return "no block's mean entropy differs between the lenses beyond its interval"
    ranked = clear.reindex(clear["difference"].abs().sort_values(ascending=False, kind="stable").index).head(top)
    parts = [f"{r.block} ({r.difference:+.3g} [{r.ci_low:.3g}, {r.ci_high:.3g}] nats)" for r in ranked.itertuples()]
    return f"block{'s' if len(parts) > 1 else ''} " + ", ".join(parts)


def dataset_robustness(
    logit: Mapping[str, xr.Dataset],
    lenses: Mapping[str, Mapping[str, xr.Dataset]],
    *,
    dataset: str,
    labels: Mapping[str, Mapping[str, object]],
    expected: Expected,
    knn: KnnSettings,
    features: FeatureSettings,
    n_boot: int,
    seed: int,
    grid_points: int = DEFAULT_GRID_POINTS,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The verdicts one dataset's profiles give under the logit lens and under each fitted kind, and where they part.

    Both sides run the same analyses on the same models' profiles of ``dataset``: every paper-table input whose
    ``PaperInput`` recomputes it from a store (:func:`entropy_lens.verdicts.table.store_tables`:
    kNN separability in Shannon entropy, ΔH-nucleus Spearman, adjacent-layer overlap, profile shapes; on the blank
    set also the held-out family and the same-family pairs), so each verdict is compared within one scope. The
    logit lens's side is analysed once for every kind.

    Args:
        logit: Per-model stores (model -> dataset) under the logit lens.
        lenses: Fitted kind -> per-model stores of the same prompts under that lens.
        dataset: The dataset's name.
        labels: ``{model: {"family", "n_params"}}`` (:func:`entropy_lens.store.combine.combine_dataset`).
        expected: What the paper table expects (its ``datasets`` restricted to this dataset's lens models).
        knn, features: The run's kNN settings.
        n_boot, seed: Bootstrap replicates and seed of the intervals.
        grid_points: The normalized-depth grid of the same-family pairs (``analysis.depth_grid``).

    Returns:
        ``(changes, blocks)``, kind by kind: :func:`verdict_changes` rows with ``dataset``, ``scope`` (the
        models read, comma-separated: the scope of a row pooling them), ``headline`` (whether the verdict table
        shows the row: :func:`entropy_lens.verdicts.table.headline`) and ``blocks`` (the
        :func:`driving_blocks` of the row's model; ``""`` for a row of several models), and the
        :func:`block_differences` rows of every model with ``model``, ``dataset`` and ``kind``.

    Raises:
        ValueError: when a side holds other models, or a model's generated tokens differ between them.
    """
    settings = StoreSettings(knn, features, n_boot, seed, grid_points)
    under_logit = _paper(combine_dataset(logit, labels), dataset, expected, settings)
    shown = set(headline(under_logit)[list(KEY)].itertuples(index=False, name=None))
    changes, blocks = [], []
    for kind, lens in lenses.items():
        parts = _block_differences(logit, lens, dataset=dataset, kind=kind, n_boot=n_boot, seed=seed)
        under_lens = _paper(combine_dataset(lens, labels), dataset, expected, settings)
        rows = verdict_changes(under_logit, under_lens, kind).assign(dataset=dataset, scope=", ".join(logit))
        rows["headline"] = [key in shown for key in rows[list(KEY)].itertuples(index=False, name=None)]
        drivers = {m: driving_blocks(group) for m, group in parts.groupby("model", sort=False)}
        changes.append(rows.assign(blocks=rows["model"].map(drivers).fillna("")))
        blocks.append(parts)
    return pd.concat(changes, ignore_index=True), pd.concat(blocks, ignore_index=True)


def _block_differences(
    logit: Mapping[str, xr.Dataset], lens: Mapping[str, xr.Dataset], *, dataset: str, kind: str, n_boot: int, seed: int
) -> pd.DataFrame:
    """:func:`block_differences` of every model, after checking both sides read the same generated tokens."""
    if list(logit) != list(lens):
        raise ValueError(f"{dataset}: the logit lens's models {list(logit)} differ from the {kind} lens's {list(lens)}")
    frames = []
    for model in logit:
        same = logit[model][schema.TOKEN_ID].values, lens[model][schema.TOKEN_ID].values
        if same[0].shape != same[1].shape or not np.array_equal(*same):
            raise ValueError(f"{model} on {dataset}: the {kind} lens's profiles read other generated tokens")
        order = (schema.PROMPT, schema.TOKEN, schema.LAYER)
        entropies = (store[model][schema.ENTROPY].transpose(*order).values for store in (logit, lens))
        table = block_differences(*entropies, n_boot=n_boot, seed=seed)
        frames.append(table.assign(model=model, dataset=dataset, kind=kind))
    return pd.concat(frames, ignore_index=True)


def _paper(store: xr.Dataset, dataset: str, expected: Expected, settings: StoreSettings) -> pd.DataFrame:
    """The paper table of every input whose entry recomputes it from the store (:func:`store_tables`), its
    mechanical rows read as the paper table job reads them (:func:`~entropy_lens.verdicts.mechanical.mark_mechanical`:
    the planted-true rates only, no planted-null draws)."""
    table = paper_table(**store_tables(store, dataset, settings), expected=expected)
    return mark_mechanical(table, true_rates(table))


def with_robustness(
    top: pd.DataFrame, changes: pd.DataFrame, datasets: Mapping[str, Sequence[str]] | None = None
) -> pd.DataFrame:
    """``top`` (verdict rows) with a column ``under_<kind>`` per fitted kind: the verdict the row's model and
    dataset give under that lens, where it was read (``""`` elsewhere).

    A row pooling every model of a dataset (``model`` ``"all"``: family separability) gets the lens's verdict
    only where the lens read every model the run profiled on that dataset (``datasets``: dataset -> the run's
    models; ``changes``' ``scope``); otherwise its scope is not the same and it stays ``""``."""
    out = top.copy()
    keys = ["claim_id", "model", "split", "measure", "unit"]
    complete = {
        d for d, models in (datasets or {}).items() if set(models) and _scope(changes, d) == set(map(str, models))
    }
    pooled = changes["model"].eq("all") & changes.get("dataset", pd.Series("", index=changes.index)).isin(complete)
    single = changes[changes["model"].isin(set(top["model"].astype(str)) - {"all", ""}) | pooled]
    for kind, rows in single.groupby("kind", sort=False):
        twice = rows[rows.duplicated(keys, keep=False)]
        if not twice.empty:
            raise ValueError(f"the {kind} lens gives a verdict row twice: {twice.iloc[0][keys].to_dict()}")
        verdicts = rows.set_index(keys)["verdict_lens"]
        index = pd.MultiIndex.from_frame(out[keys].astype(str))
        out[f"{UNDER_LENS}{kind}"] = verdicts.reindex(index).fillna("").to_numpy()
    return out


def _scope(changes: pd.DataFrame, dataset: str) -> set[str]:
    """The models the lens read on ``dataset`` (the ``scope`` column of its rows)."""
    if "scope" not in changes.columns:
        return set()
    scopes = changes.loc[changes["dataset"] == dataset, "scope"].astype(str)
    return {m for scope in scopes for m in scope.split(", ") if m}
