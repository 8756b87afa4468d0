"""Rendering the paper table for readers: strings with intervals, counts by role, Markdown and HTML.

The rows are :func:`entropy_lens.analysis.paper.paper_table`'s; nothing here decides a verdict.
"""

from __future__ import annotations

import html
import math
import re
import textwrap
from collections.abc import Mapping
from typing import Any

import pandas as pd

from entropy_lens.analysis import verdicts as V
from entropy_lens.analysis.claims import EXTENSION, FINDING, PRECONDITION
from entropy_lens.analysis.outcomes import UNDECIDED
from entropy_lens.core.tables import to_markdown

PERCENT = 100.0
NOT_RUN = "not run"
AUC, RHO, ACC, POINTS, CONTAINMENT, JACCARD, NATS = (
    "AUC %",
    "rho",
    "accuracy %",
    "accuracy points",
    "containment",
    "Jaccard",
    "nats",
)
LOGPROB, SHARE, AUC_POINTS, LOG_V = "nats (log p gold)", "share %", "AUC points", "fraction of log V"
SCALES = {AUC: PERCENT, ACC: PERCENT, POINTS: PERCENT, SHARE: PERCENT, AUC_POINTS: PERCENT}
THREE_DIGITS = (RHO, CONTAINMENT, JACCARD, NATS, LOGPROB, LOG_V)

GREEN, RED, AMBER, BLUE = "#1a7f37", "#cf222e", "#9a6700", "#0969da"
VERDICT_COLOURS = {
    **dict.fromkeys((V.REPRODUCED, *V.PRECONDITION_WORDS.values(), V.EXTENSION_WORDS[V.REPRODUCED]), GREEN),
    V.NOT_REPRODUCED: RED,
    V.PRECONDITION_WORDS[V.NOT_REPRODUCED]: RED,
    V.EXTENSION_WORDS[V.NOT_REPRODUCED]: RED,
    V.INCONCLUSIVE: AMBER,
    UNDECIDED: AMBER,
}
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
HEADINGS = {
    EXTENSION: (
        "Extensions: the same tests where the study made no claim",
        "models or families the study said nothing about; what the rule found, counted apart from the findings",
    ),
    PRECONDITION: (
        "Preconditions: do the models know MMLU?",
        "not findings of the study: MMLU correctness and layer skipping can only be read on a model that answers "
        "above chance and the majority letter",
    ),
}


def colour(word: str) -> str:
    """The badge colour of a verdict, precondition or extension word (blue for a decided outcome)."""
    return VERDICT_COLOURS.get(word, BLUE)


# Columns of a verdict table giving the verdict under a fitted lens (``under_linear``, ``under_tuned``).
UNDER_LENS = "under_"


def display(table: pd.DataFrame) -> pd.DataFrame:
    """Strings for reading: ``ours``, ``baseline`` and ``study protocol`` as ``x [lo, hi]`` in the row's unit,
    and after ``verdict`` the verdict under each fitted lens where the table has one."""
    records = table.to_dict("records")
    claims = [_claim_text(r) for r in records]
    view = pd.DataFrame(
        {
            "claim": claims,
            "model": table["model"],
            "split": table["split"],
            "measure": table["measure"],
            "ours (95% CI)": [_fmt(r, "estimate", "ci") for r in records],
            "baseline": [_fmt(r, "baseline", "baseline") for r in records],
            "study protocol": [_fmt(r, "study_protocol", "study_protocol") for r in records],
            "study": table["study"],
            "verdict": table["verdict"],
            "why": table["why"],
            "n": table["n"],
        }
    )
    # The verdict under each fitted lens (lens_robustness), beside the logit lens's.
    for column in [c for c in table.columns if c.startswith(UNDER_LENS)][::-1]:
        view.insert(view.columns.get_loc("verdict") + 1, f"under {column[len(UNDER_LENS) :]} lens", table[column])
    return view


def _claim_text(row: Mapping[str, Any]) -> str:
    return row["claim"] if row["role"] == FINDING else f"{row['claim']} ({row['role']})"


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _fmt(row: Mapping[str, Any], value: str, prefix: str) -> str:
    estimate = _number(row[value])
    if math.isnan(estimate):
        return ""
    unit = str(row["unit"] or "")
    scale, digits = SCALES.get(unit, 1.0), 3 if unit in THREE_DIGITS else 1
    lo, hi = _number(row[f"{prefix}_low"]), _number(row[f"{prefix}_high"])
    text = f"{estimate * scale:.{digits}f}"
    if not (math.isnan(lo) or math.isnan(hi)):
        text += f" [{lo * scale:.{digits}f}, {hi * scale:.{digits}f}]"
    return text + (f" {unit}" if unit and unit != RHO else "")


def by_role(table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The rows of each role, in :data:`entropy_lens.analysis.claims.ROLES` order."""
    return {role: table[table["role"] == role] for role in (FINDING, EXTENSION, PRECONDITION)}


def summary(table: pd.DataFrame) -> list[str]:
    """The headline's counts: findings (measured, then not run), extensions and preconditions, apart.

    Args:
        table: :func:`entropy_lens.analysis.paper.headline` rows.

    Returns:
        One sentence per role present (findings always).
    """
    parts = by_role(table)
    findings = parts[FINDING]
    not_run = findings["why"].astype(str).str.startswith(NOT_RUN)
    counts = findings.loc[~not_run, "verdict"].value_counts()
    first = "Claims of the study: " + ", ".join(f"{int(counts.get(v, 0))} {v}" for v in V.VERDICTS)
    first += f"; {int(not_run.sum())} not run by this configuration (listed last)" if not_run.any() else ""
    lines = [first + "."]
    extensions = parts[EXTENSION]
    if not extensions.empty:
        found = extensions["verdict"].value_counts()
        words = ", ".join(f"{int(n)} {word}" for word, n in found.items())
        lines.append(f"Extensions (where the study made no claim; counted apart): {words}.")
    preconditions = parts[PRECONDITION]
    if not preconditions.empty:
        unread = preconditions["why"].astype(str).str.startswith(NOT_RUN)
        met = preconditions.loc[~unread, "verdict"].value_counts()
        words = ", ".join(f"{int(met.get(w, 0))} {w}" for w in V.PRECONDITION_WORDS.values())
        words += f"; {int(unread.sum())} not run" if unread.any() else ""
        lines.append(f"Preconditions: {words} ({HEADINGS[PRECONDITION][1]}).")
    return lines


def verdicts_markdown(table: pd.DataFrame, title: str) -> str:
    """The headline as Markdown: the counts, the findings' table, then extensions and preconditions."""
    parts = by_role(table)
    text = f"# {title}\n\n" + "".join(f"**{line}**\n\n" for line in summary(table))
    text += to_markdown(display(parts[FINDING]))
    for role in (EXTENSION, PRECONDITION):
        if not parts[role].empty:
            text += f"\n## {HEADINGS[role][0]}\n\n{to_markdown(display(parts[role]))}"
    return text


def verdicts_html(table: pd.DataFrame) -> str:
    """The headline as a styled HTML fragment (coloured verdicts) for the report's first page."""
    parts = by_role(table)
    lines = "<br>".join(html.escape(line) for line in summary(table))
    text = f"{HTML_STYLE}\n<p><b>{lines}</b><br>(95% intervals; rules in the README, section Verdict rules)</p>\n"
    text += _html_table(parts[FINDING])
    for role in (EXTENSION, PRECONDITION):
        if not parts[role].empty:
            text += f"<h4>{html.escape(HEADINGS[role][0])}</h4>\n" + _html_table(parts[role])
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
                text = f'<span class="verdict" style="background:{colour(str(value))}">{text}</span>'
            cells.append(f'<td class="{"why" if column == "why" else ""}">{text}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    body = "\n".join(rows)
    return f'<table class="verdicts"><thead><tr>{header}</tr></thead><tbody>\n{body}\n</tbody></table>\n'


# The terminal table: claim, model and split, our estimate, verdict; wrapped, never cut, to fit this width.
TERMINAL_WIDTH = 120
TERMINAL_COLUMNS = (("claim", 40), ("model / split", 28), ("ours (95% CI)", 28), ("verdict", 18))


def compact(table: pd.DataFrame) -> pd.DataFrame:
    """The four columns a reader needs first: claim (role noted), model with split, estimate, verdict."""
    view = display(table)
    where = [m if not s else f"{m} ({s})" for m, s in zip(view["model"], view["split"].astype(str), strict=True)]
    return pd.DataFrame(
        {
            "claim": view["claim"],
            "model / split": where,
            "ours (95% CI)": view["ours (95% CI)"],
            "verdict": view["verdict"],
        }
    )


def terminal_table(table: pd.DataFrame) -> str:
    """The headline as plain text no wider than :data:`TERMINAL_WIDTH`: the counts, then one block per row
    whose cells wrap within their column (nothing is cut). Where the verdicts were read again under a fitted
    lens, a row's verdict cell adds each kind's (``under linear: inconclusive``)."""
    rows = compact(table)
    for column in [c for c in table.columns if c.startswith(UNDER_LENS)]:
        kind, read = column[len(UNDER_LENS) :], table[column].astype(str).to_numpy()
        rows["verdict"] = [f"{v}; under {kind}: {u}" if u else v for v, u in zip(rows["verdict"], read, strict=True)]
    widths = [w for _, w in TERMINAL_COLUMNS]
    lines = [textwrap.fill(line, TERMINAL_WIDTH) for line in summary(table)] + [""]
    lines.append("  ".join(f"{name:<{w}}" for name, w in TERMINAL_COLUMNS).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    for rec in rows.itertuples(index=False):
        cells = [textwrap.wrap(str(v), w) or [""] for v, w in zip(rec, widths, strict=True)]
        for i in range(max(len(c) for c in cells)):
            lines.append(
                "  ".join(f"{(c[i] if i < len(c) else ''):<{w}}" for c, w in zip(cells, widths, strict=True)).rstrip()
            )
    return "\n".join(lines) + "\n"


def compact_markdown(table: pd.DataFrame) -> str:
    """The headline's counts and its four columns as Markdown (the README's answer sections)."""
    return "".join(f"**{line}**\n\n" for line in summary(table)) + to_markdown(compact(table))


def digest_markdown(table: pd.DataFrame) -> str:
    """The headline's counts and one line per claim: how many rows got each verdict, on which models (the
    README's answer sections; every estimate with its interval stays in ``verdicts.md``)."""
    lines = ["| claim | verdicts (rows: models) |", "|---|---|"]
    said = table["verdict"].where(~table["why"].astype(str).str.startswith(NOT_RUN), NOT_RUN)
    for claim, rows in table.assign(said=said).groupby(table.apply(_claim_text, axis=1), sort=False):
        words = [_digest_words(word, group) for word, group in rows.groupby("said", sort=False)]
        lines.append(f"| {claim} | {'; '.join(words)} |")
    return "".join(f"**{line}**\n\n" for line in summary(table)) + "\n".join(lines) + "\n"


# Model cells that name no one model: every model pooled, or none in the configuration.
PLACEHOLDER_MODELS = frozenset({"all", "none", ""})


def _digest_words(word: str, group: pd.DataFrame) -> str:
    """``word ×n: models``; rows not run add why, each reason once (a row's own model named "the model")."""
    models = ", ".join(dict.fromkeys(group["model"].astype(str)))
    if word != NOT_RUN:
        return f"{word} ×{len(group)}: {models}"
    reasons = dict.fromkeys(
        _reason(str(why), str(model)) for why, model in zip(group["why"], group["model"], strict=True)
    )
    return f"{word} ×{len(group)}: {models} ({'; '.join(reasons)})"


def _reason(why: str, model: str) -> str:
    reason = why.removeprefix(f"{NOT_RUN}:").strip()
    if model in PLACEHOLDER_MODELS or "," in model:
        return reason
    return re.sub(rf"(?<![\w.-]){re.escape(model)}(?![\w.-])", "the model", reason)
