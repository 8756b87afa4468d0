"""The schedule under both lenses as ``entropy-lens skip-map`` prints it: per block, ΔH under the logit lens and each
fitted lens beside that lens's held-out KL (blocks under the KL bar marked), the blocks each lens selects, and the
two lenses' agreement, read from a run's lens tables (:mod:`entropy_lens.analysis.schedule`)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from entropy_lens.analysis.schedule import KL_BAR, LOGIT
from entropy_lens.analysis.schedule_agreement import UNDER_BAR
from entropy_lens.core.tables import read_csv_table

SCHEDULE_PATH = "{results}/tables/lens_schedule.csv"
CHOICES_PATH = "{results}/tables/lens_schedule_choices.csv"
AGREEMENT_PATH = "{results}/tables/lens_schedule_agreement.csv"
UNDER = "*"


def _cell(value: float, under: bool, spec: str) -> str:
    return (f"{value:{spec}}" + (UNDER if under else " ")) if math.isfinite(value) else "n/a".rjust(7) + " "


def render_schedule(schedule: pd.DataFrame) -> str:
    """Per block, each lens's ΔH (marked where its ΔH is under the bar) and held-out KL (marked where the block is).

    Args:
        schedule: One model's rows of :func:`entropy_lens.analysis.schedule.schedule_table`.
    """
    lenses = list(dict.fromkeys(schedule["lens"]))
    wide = {lens: schedule[schedule["lens"] == lens].set_index("block").sort_index() for lens in lenses}
    header = "block" + "".join(f"  {'ΔH ' + lens:>12s}  {'KL ' + lens:>12s}" for lens in lenses)
    lines = [
        f"the schedule under each lens, on held-out questions ({UNDER}: under the {KL_BAR:g}-nat KL bar, so the "
        "reading counts as the model's; ΔH reads two blocks, both must be):",
        header,
    ]
    for block in wide[lenses[0]].index:
        cells = []
        for lens in lenses:
            rec = wide[lens].loc[block]
            cells.append(f"  {_cell(float(rec['delta_h']), bool(rec['under_bar']), '+11.3f')}")
            cells.append(f" {_cell(float(rec['kl']), bool(rec['block_under_bar']), '12.2f')}")
        lines.append(f"{int(block):5d}" + "".join(cells))
    converging = wide[LOGIT].index[wide[LOGIT]["convergence"].astype(bool)] if LOGIT in wide else []
    lines.append(
        "logit-lens ΔH mostly the lens converging (above the bar, its KL falls by more than |ΔH|): blocks "
        + (", ".join(str(int(b)) for b in converging) or "none")
    )
    return "\n".join(lines)


def render_choices(choices: pd.DataFrame) -> str:
    """The expansion and pruning block each lens selects under the bar, beside its choice among every block."""
    lines = ["blocks each lens selects among its blocks under the bar (beside: among every eligible block):"]
    for (variant, phase), group in choices.groupby(["variant", "phase"], sort=False):
        parts = []
        for rec in group.to_dict("records"):
            chosen = str(int(rec["block"])) if int(rec["block"]) >= 0 else str(rec["reading"])
            parts.append(f"{rec['lens']} {chosen} ({int(rec['every_block'])})")
        lines.append(f"  {phase}, {variant}: " + "; ".join(parts))
    return "\n".join(lines)


def render_agreement(agreement: pd.DataFrame) -> str:
    """The two lenses' Spearman over blocks beside its block-permutation null, and whether it can be read."""
    lines = []
    for rec in agreement.to_dict("records"):
        reading = rec["reading"] if isinstance(rec["reading"], str) and rec["reading"] else ""
        numbers = (
            f"rho {rec['rho']:+.2f} [{rec['ci_low']:+.2f}, {rec['ci_high']:+.2f}], block permutation "
            f"[{rec['null_low']:+.2f}, {rec['null_high']:+.2f}], excess [{rec['beyond_low']:+.2f}, "
            f"{rec['beyond_high']:+.2f}]"
            if math.isfinite(rec["rho"])
            else "no Spearman"
        )
        where = f"the {int(rec['n_blocks'])} blocks {rec['blocks']}" + (
            f" of the {rec['lens']} lens" if rec["blocks"] == UNDER_BAR else ""
        )
        lines.append(f"logit vs {rec['lens']} lens over {where}: {numbers}" + (f"; {reading}" if reading else ""))
    return "\n".join(lines)


def schedule_text(results: str, model: str) -> str:
    """The schedule of ``model`` under both lenses where the run fitted a lens for it (``""`` where not)."""
    paths = [Path(t.format(results=results)) for t in (SCHEDULE_PATH, CHOICES_PATH, AGREEMENT_PATH)]
    if not all(p.is_file() for p in paths):
        return ""
    schedule, choices, agreement = (table[table["model"] == model] for table in map(read_csv_table, paths))
    if schedule.empty:
        return ""
    return "\n".join([render_schedule(schedule), render_choices(choices), render_agreement(agreement)]) + "\n\n"
