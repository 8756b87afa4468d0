"""``entropy-lens skip-map``: what skipping each block costs, which criterion predicts it, where the answer forms
and which blocks to drop, read from a run's layer-skip tables."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

from entropy_lens.cli.lens_schedule import schedule_text
from entropy_lens.cli.profile import sparkline
from entropy_lens.core.tables import read_csv_table
from entropy_lens.skipping.criteria import ACCURACY
from entropy_lens.skipping.exit import LOGIT
from entropy_lens.verdicts.claims.drop_sets import RECOMMEND_STATISTIC, recommended

SKIP_MAP_PATH = "{results}/tables/skip_map.csv"


def render_skip_map(rows: pd.DataFrame) -> str:
    """One model's criticality map as text: per block its Delta H and what skipping it alone costs.

    Args:
        rows: One model's and measure's rows of :func:`entropy_lens.skipping.criticality.skip_map`.
    """
    rows = rows.sort_values("layer")
    delta_h = rows["delta_h"].to_numpy(float)
    lo, hi = (np.nanmin(delta_h), np.nanmax(delta_h)) if np.isfinite(delta_h).any() else (0.0, 1.0)
    header = f"{'block':>5}  {'depth':>5}  {'ΔH nats':>9}  {'Δ accuracy, points':>22}  {'Δ log p(gold), nats':>24}"
    lines = [f"{header}  reading  marks"]
    for rec in rows.to_dict("records"):
        bar = sparkline([rec["delta_h"]], lo, hi) if math.isfinite(rec["delta_h"]) else " "
        acc = _interval_text(100 * rec["d_accuracy"], 100 * rec["d_accuracy_low"], 100 * rec["d_accuracy_high"], 1)
        logp = _interval_text(rec["d_logprob"], rec["d_logprob_low"], rec["d_logprob_high"], 3)
        marks = rec["marks"] if isinstance(rec["marks"], str) else ""
        delta = f"{rec['delta_h']:+8.3f}" if math.isfinite(rec["delta_h"]) else "     n/a"
        cells = f"{int(rec['layer']):5d}  {rec['depth']:5.2f}  {delta}{bar}  {acc:>22}  {logp:>24}"
        lines.append(f"{cells}  {rec['reading']:7s}  {marks}")
    by_reading = rows.groupby("reading")["layer"].apply(lambda v: ", ".join(str(int(x)) for x in v))
    safe, costly = by_reading.get("safe", "none"), by_reading.get("costly", "none")
    lines.append(f"safe to skip (a drop of 5 points ruled out): {safe}; costly (a drop for sure): {costly}")
    return "\n".join(lines)


CRITERIA_PATH = "{results}/tables/skip_criteria_spearman.csv"
EXIT_PATH = "{results}/tables/skip_exit.csv"
DROP_SETS_PATH = "{results}/tables/skip_drop_sets.csv"


def render_drop_sets(rows: pd.DataFrame) -> str:
    """The blocks each criterion would drop, per variant and k (one model); their retained accuracy is unscored."""
    lines = ["drop sets (the k least critical blocks by each criterion; not scored yet: no retained accuracy):"]
    for (variant, k), group in rows.groupby(["variant", "k"], sort=False):
        sets = "; ".join(f"{rec['criterion']} {rec['layers']}" for rec in group.to_dict("records"))
        lines.append(f"  {variant}, k = {int(k)}: {sets}")
    return "\n".join(lines)


DROP_SCORES_PATH = "{results}/tables/skip_drop_scores.csv"


def render_drop_scores(rows: pd.DataFrame) -> str:
    """Per variant and ``k``, each criterion's drop set with what it keeps (accuracy and the gold letter's
    log-probability, each against the intact model with its interval), against one random ``k``-set drawn per
    question, and the set recommended by the rule fixed before any set was scored
    (:func:`entropy_lens.verdicts.claims.drop_sets.recommended`: better than random and than every other set).

    Args:
        rows: One model's and measure's rows of :func:`entropy_lens.skipping.drop_scores.drop_scores`, both
            statistics.
    """
    lines = ["drop sets (the k least critical blocks by each criterion, skipped together; kept against intact):"]
    primary = rows[rows["statistic"] == RECOMMEND_STATISTIC]
    accuracy = rows[rows["statistic"] == ACCURACY].set_index(["variant", "k", "criterion"])
    for (variant, k), group in primary.groupby(["variant", "k"], sort=False):
        first = group.iloc[0]
        lines.append(
            f"  {variant}, k = {int(k)} ({int(first['n'])} questions; a random k-set drawn per question: log p "
            f"{first['null_estimate']:+.3f} [{first['null_low']:+.3f}, {first['null_high']:+.3f}] nats; "
            f"{int(first['n_sets'])} distinct sets):"
        )
        for rec in group.sort_values("change", ascending=False).to_dict("records"):
            logp = _interval_text(rec["change"], rec["ci_low"], rec["ci_high"], 3)
            beyond = _interval_text(rec["beyond"], rec["beyond_low"], rec["beyond_high"], 3)
            acc = (
                accuracy.loc[(variant, k, rec["criterion"])]
                if (variant, k, rec["criterion"]) in accuracy.index
                else None
            )
            kept = (
                ""
                if acc is None
                else (
                    f"accuracy {100 * acc['value']:5.1f}% "
                    f"({_interval_text(100 * acc['change'], 100 * acc['ci_low'], 100 * acc['ci_high'], 1)} points); "
                )
            )
            lines.append(
                f"    {rec['criterion']:18s} {rec['layers']:>14s}  {kept}log p {logp} nats; "
                f"beyond random {beyond}; {rec['reading']}"
            )
        chosen = recommended(group)
        lines.append(
            f"    recommended: {' and '.join(chosen['criterion'])}'s blocks {chosen.iloc[0]['layers']}"
            if len(chosen)
            else "    recommended: none (no set keeps more than random and than every other criterion's set)"
        )
    return "\n".join(lines)


def render_criteria(rows: pd.DataFrame) -> str:
    """Which criterion predicts what skipping a block costs: each one's Spearman with the cost, and the best one
    where the interval of its margin over the next best (paired replicates) lies above 0.

    Args:
        rows: One model's and measure's rows of :func:`entropy_lens.skipping.criteria.criteria_spearman`.
    """
    lines = []
    for (statistic, variant), group in rows.groupby(["statistic", "variant"], sort=False):
        n_blocks, n = int(group["n_blocks"].iloc[0]), int(group["n"].iloc[0])
        lines.append(f"cost = drop of {statistic}, {variant} ({n_blocks} blocks fixed, {n} questions resampled):")
        if group["rho"].isna().all():
            lines.append("  too few blocks or questions to rank (a Spearman needs 3 blocks)")
            continue
        for rec in group.sort_values("rho", ascending=False).to_dict("records"):
            rho = _interval_text(rec["rho"], rec["ci_low"], rec["ci_high"], 2)
            null = f"[{rec['null_low']:+.2f}, {rec['null_high']:+.2f}]"
            lines.append(f"  {rec['criterion']:16s} rho {rho:>24}  null {null}  {rec['reading']}")
        lines.append(f"  best: {_best_criterion(group)}")
    return "\n".join(lines)


def _best_criterion(group: pd.DataFrame) -> str:
    top = group.sort_values("rho", ascending=False).iloc[0]
    if top["margin_low"] > 0:
        margin = f"[{top['margin_low']:+.2f}, {top['margin_high']:+.2f}]"
        return f"{top['criterion']} (its margin over the next best, paired: {margin})"
    return "none separates from the others (no margin over the next best excludes 0)"


def render_exit(rows: pd.DataFrame) -> str:
    """Where the answer forms: per lens, the first block whose accuracy reaches the model's own (one model, measure).

    Args:
        rows: One model's and measure's rows of :func:`entropy_lens.skipping.exit.exit_curve`; a table written
            before its ``lens`` column reads as the logit lens's.
    """
    rows = rows if "lens" in rows else rows.assign(lens=LOGIT)
    own = rows[rows["lens"] == LOGIT].sort_values("position").iloc[-1]  # x_L: the model's own answer
    parts = [f"exit curve: the model's own answer {100 * own['accuracy']:.1f}%"]
    for lens, group in rows.groupby("lens", sort=False):
        reached = group.loc[group["ci_high"] >= own["accuracy"], "position"]
        where = _first_block(int(reached.min()), int(own["position"])) if len(reached) else "never"
        parts.append(
            f"read through the logit lens, the answer's accuracy first reaches it (within its interval) {where}"
            if lens == LOGIT
            else f"through the {lens} lens, {where}"
        )
    return "; ".join(parts)


def _first_block(first: int, blocks: int) -> str:
    if first == 0:
        return "already at the embeddings"
    return f"after block {first - 1} ({first} of {blocks} blocks run)"


def _interval_text(value: float, low: float, high: float, digits: int) -> str:
    return f"{value:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def skip_map_command(args: argparse.Namespace) -> int:
    path = Path(SKIP_MAP_PATH.format(results=args.results))
    if not path.is_file():
        raise FileNotFoundError(
            f"no criticality map at {path}; run the workflow with layer_skip enabled, or pass --results of a run"
        )
    table = read_csv_table(path)
    table = table[table["measure"] == args.measure]
    models = list(dict.fromkeys(table["model"]))
    if args.model is not None:
        if args.model not in models:
            raise ValueError(f"model {args.model!r} has no criticality map in {path}; it has {models}")
        models = [args.model]
    for model in models:
        rows = table[table["model"] == model]
        n = int(rows["n"].max()) if len(rows) else 0
        print(f"{model}: every block skipped alone, {n} MMLU questions, {args.measure} letters\n")
        print(render_skip_map(rows) + "\n")
        print(schedule_text(args.results, model), end="")
        for template, render in ((CRITERIA_PATH, render_criteria), (EXIT_PATH, render_exit)):
            extra = Path(template.format(results=args.results))
            if extra.is_file():
                found = read_csv_table(extra).query("model == @model and measure == @args.measure")
                print(render(found) + "\n" if len(found) else "", end="")
        print(_drops_text(args.results, model, args.measure), end="")
    return 0


def _drops_text(results: str, model: str, measure: str) -> str:
    """The scored drop sets of ``model`` where the run scored them, else the sets alone (``""``: neither)."""
    scores, drops = (Path(t.format(results=results)) for t in (DROP_SCORES_PATH, DROP_SETS_PATH))
    found = read_csv_table(scores, dtype={"layers": str}) if scores.is_file() else pd.DataFrame()
    if len(found):
        found = found.query("model == @model and measure == @measure")
    if len(found):
        return render_drop_scores(found) + "\n"
    found = read_csv_table(drops, keep_default_na=False).query("model == @model") if drops.is_file() else found
    return render_drop_sets(found) + "\n" if len(found) else ""
