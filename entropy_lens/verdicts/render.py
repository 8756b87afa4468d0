"""Rendering the paper table for readers: strings with intervals, counts by role, Markdown and HTML.

The rows are :func:`entropy_lens.verdicts.table.paper_table`'s; nothing here decides a verdict.
"""

from __future__ import annotations

import html
import math
import re
import textwrap
from collections.abc import Mapping
from typing import Any

import pandas as pd

from entropy_lens.core.tables import to_markdown
from entropy_lens.verdicts import decision as D
from entropy_lens.verdicts.claim import EXTENSION, FINDING, PRECONDITION
from entropy_lens.verdicts.claim_verdicts import BEYOND, MIXED, NO_NULL, claim_verdicts
from entropy_lens.verdicts.outcomes import UNDECIDED
from entropy_lens.verdicts.units import RHO, SCALES, THREE_DIGITS

NOT_RUN = D.NOT_RUN

GREEN, RED, AMBER, BLUE = "#1a7f37", "#cf222e", "#9a6700", "#0969da"
VERDICT_COLOURS = {
    **dict.fromkeys((D.REPRODUCED, *D.PRECONDITION_WORDS.values(), D.EXTENSION_WORDS[D.REPRODUCED]), GREEN),
    D.NOT_REPRODUCED: RED,
    D.PRECONDITION_WORDS[D.NOT_REPRODUCED]: RED,
    D.EXTENSION_WORDS[D.NOT_REPRODUCED]: RED,
    D.INCONCLUSIVE: AMBER,
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
            "null": _column(table, "null"),
            "ours - null (95% CI)": [_fmt(r, "beyond", "beyond") if "beyond" in r else "" for r in records],
            "beyond its null": _column(table, "beyond_verdict"),
            "n": table["n"],
        }
    )
    if "beyond_twin_verdict" in table.columns:  # twins: the row against its model's random-init twin
        view.insert(view.columns.get_loc("beyond its null") + 1, "beyond the twin", table["beyond_twin_verdict"])
    # The verdict under each fitted lens (lens_robustness), beside the logit lens's.
    for column in [c for c in table.columns if c.startswith(UNDER_LENS)][::-1]:
        view.insert(view.columns.get_loc("verdict") + 1, f"under {column[len(UNDER_LENS) :]} lens", table[column])
    return view


def _column(table: pd.DataFrame, name: str) -> pd.Series:
    return table[name] if name in table.columns else pd.Series("", index=table.index)


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
    """The rows of each role, in :data:`entropy_lens.verdicts.claim.ROLES` order."""
    return {role: table[table["role"] == role] for role in (FINDING, EXTENSION, PRECONDITION)}


def summary(table: pd.DataFrame) -> list[str]:
    """The headline's counts, one verdict per claim (:mod:`entropy_lens.verdicts.claim_verdicts`): findings
    (measured, then not run) with how many cleared their nulls, extensions and preconditions, apart.

    Args:
        table: :func:`entropy_lens.verdicts.table.headline` rows.

    Returns:
        One sentence per role present (findings always).
    """
    claims = claim_verdicts(table)
    findings = claims[claims["role"] == FINDING]
    run = findings[findings["verdict"] != NOT_RUN]
    found = run["verdict"].value_counts()
    words = [*D.VERDICTS[:2], MIXED, D.VERDICTS[2]]
    first = "Claims of the study: " + ", ".join(f"{int(found.get(w, 0))} {w}" for w in words)
    n_not_run = len(findings) - len(run)
    first += f"; {n_not_run} not run by this configuration (listed last)" if n_not_run else ""
    beyond = run["beyond_null"].value_counts()
    first += ". Beyond their nulls: " + ", ".join(
        f"{int(beyond.get(w, 0))} {w}" for w in (*BEYOND, MIXED, NO_NULL) if w in beyond or w in BEYOND
    )
    lines = [first + "."]
    extensions = claims[claims["role"] == EXTENSION]
    if not extensions.empty:
        tally = ", ".join(f"{int(n)} {w}" for w, n in extensions["verdict"].value_counts(sort=False).items())
        lines.append(f"Extensions (where the study made no claim; counted apart): {tally}.")
    preconditions = claims[claims["role"] == PRECONDITION]
    if not preconditions.empty:
        unread = preconditions["verdict"] == NOT_RUN
        met = preconditions.loc[~unread, "verdict"].value_counts()
        words = ", ".join(f"{int(met.get(w, 0))} {w}" for w in D.PRECONDITION_WORDS.values())
        words += f", {int(met[MIXED])} {MIXED}" if MIXED in met else ""
        words += f"; {int(unread.sum())} not run" if unread.any() else ""
        lines.append(f"Preconditions: {words} ({HEADINGS[PRECONDITION][1]}).")
    return lines


def claims_markdown(table: pd.DataFrame) -> str:
    """One line per claim: its verdict as stated, beyond its null, on which models, and its rows' tally."""
    claims = claim_verdicts(table)
    lines = ["| claim | as stated | beyond its null | rows |", "|---|---|---|---|"]
    for rec in claims.to_dict("records"):
        name = rec["claim"] if rec["role"] == FINDING else f"{rec['claim']} ({rec['role']})"
        stated = f"{rec['verdict']} on {rec['models']}" if rec["models"] else rec["verdict"]
        if rec["verdict"] == NOT_RUN:
            stated += f" ({_reason(str(rec['why']), '')})"
        beyond = rec["beyond_null"] + (f": {rec['beyond_why']}" if rec["beyond_why"] else "")
        lines.append(f"| {_cell(name)} | {_cell(stated)} | {_cell(beyond)} | {rec['rows']} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def verdicts_markdown(table: pd.DataFrame, title: str) -> str:
    """The headline as Markdown: the counts, the findings' table, then extensions and preconditions."""
    parts = by_role(table)
    text = f"# {title}\n\n" + "".join(f"**{line}**\n\n" for line in summary(table))
    text += "## Claims\n\n" + claims_markdown(table) + "\n## Rows\n\n"
    text += to_markdown(display(parts[FINDING]))
    for role in (EXTENSION, PRECONDITION):
        if not parts[role].empty:
            text += f"\n## {HEADINGS[role][0]}\n\n{to_markdown(display(parts[role]))}"
    return text


def verdicts_html(table: pd.DataFrame) -> str:
    """The headline as a styled HTML fragment (coloured verdicts) for the report's first page."""
    parts = by_role(table)
    lines = "<br>".join(html.escape(line) for line in summary(table))
    text = f"{HTML_STYLE}\n<p><b>{lines}</b><br>(95% intervals; rules in docs/verdicts.md)</p>\n"
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
            "verdict": [
                f"{v}; beyond its null: {b}" if b else v
                for v, b in zip(view["verdict"], view["beyond its null"].astype(str), strict=True)
            ],
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


def digest_markdown(table: pd.DataFrame) -> str:
    """The headline's counts and one line per claim (the README's answer sections; every estimate with its
    interval stays in ``verdicts.md``)."""
    return "".join(f"**{line}**\n\n" for line in summary(table)) + claims_markdown(table)


# Model cells that name no one model: every model pooled, or none in the configuration.
PLACEHOLDER_MODELS = frozenset({"all", "none", ""})


def _reason(why: str, model: str) -> str:
    reason = why.removeprefix(f"{NOT_RUN}:").strip()
    if model in PLACEHOLDER_MODELS or "," in model:
        return reason
    return re.sub(rf"(?<![\w.-]){re.escape(model)}(?![\w.-])", "the model", reason)
