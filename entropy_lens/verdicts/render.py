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
from entropy_lens.verdicts import decision
from entropy_lens.verdicts.claim import EXTENSION, FINDING, PRECONDITION
from entropy_lens.verdicts.claim_verdicts import BEYOND, MIXED, NO_NULL, claim_verdicts
from entropy_lens.verdicts.outcomes import UNDECIDED
from entropy_lens.verdicts.readings import CHANCE, NOT_READ, READINGS, ReadingColumns
from entropy_lens.verdicts.units import RHO, SCALES, THREE_DIGITS

NOT_RUN = decision.NOT_RUN
# The words of a finding's claim in the order the headline counts them; cannot test and not run are counted apart.
FINDING_WORDS = (*decision.VERDICTS[:2], MIXED, decision.VERDICTS[2], decision.MECHANICAL)

GREEN, RED, AMBER, BLUE, GREY = "#1a7f37", "#cf222e", "#9a6700", "#0969da", "#59636e"
VERDICT_COLOURS = {
    **dict.fromkeys(
        (decision.REPRODUCED, *decision.PRECONDITION_WORDS.values(), decision.EXTENSION_WORDS[decision.REPRODUCED]),
        GREEN,
    ),
    decision.NOT_REPRODUCED: RED,
    decision.PRECONDITION_WORDS[decision.NOT_REPRODUCED]: RED,
    decision.EXTENSION_WORDS[decision.NOT_REPRODUCED]: RED,
    decision.INCONCLUSIVE: AMBER,
    UNDECIDED: AMBER,
    decision.MECHANICAL: GREY,
    decision.CANNOT_TEST: GREY,
}
# The Snakemake report centres its page in the space beside the menu: a table wider than that space overflowed to
# the left, under the menu (at 1,400 px the claim column was hidden); start it at the left edge and let it scroll.
HTML_STYLE = """<style>
.prose.max-w-lg{max-width:none !important}
.h-screen.items-center{align-items:flex-start !important}
#app .grow.h-screen.justify-center{justify-content:flex-start !important;min-width:0}
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
            **_reading_view(table, records),
            **_original_view(table, records),
            "n": table["n"],
        }
    )
    # The verdict under each fitted lens (lens_robustness), beside the logit lens's.
    for column in [c for c in table.columns if c.startswith(UNDER_LENS)][::-1]:
        view.insert(view.columns.get_loc("verdict") + 1, f"under {column[len(UNDER_LENS) :]} lens", table[column])
    return view


def _column(table: pd.DataFrame, name: str) -> pd.Series:
    return table[name] if name in table.columns else pd.Series("", index=table.index)


def _read(table: pd.DataFrame, reading: ReadingColumns) -> bool:
    """Whether any row carries ``reading`` (beyond chance is always shown)."""
    return reading is CHANCE or (reading.word in table.columns and table[reading.word].astype(str).ne("").any())


def _reading_view(table: pd.DataFrame, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per reading a row carries: its null's name, observed - null with its interval, and its word."""
    view: dict[str, Any] = {}
    for reading in (r for r in READINGS if _read(table, r)):
        label = "null" if reading is CHANCE else reading.key
        view[label] = _column(table, reading.name)
        view[f"ours - {label} (95% CI)"] = [
            _fmt(r, reading.beyond, reading.beyond_low.removesuffix("_low")) if reading.beyond in r else ""
            for r in records
        ]
        view[reading.title] = _column(table, reading.word)
    return view


def _original_view(table: pd.DataFrame, records: list[dict[str, Any]]) -> dict[str, Any]:
    """The rule the row's statistic replaced after the values were seen, with its reading (where a row has one)."""
    if "original_verdict" not in table.columns or not table["original_verdict"].astype(str).ne("").any():
        return {}
    cells = [
        f"{r['original_rule']}: {_fmt(r, 'original', 'original')}, {r['original_verdict']}"
        if r.get("original_verdict")
        else ""
        for r in records
    ]
    return {"original rule": cells}


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
    (measured; then cannot test and not run, counted apart) with how many cleared each reading, extensions and
    preconditions, apart.

    Args:
        table: :func:`entropy_lens.verdicts.table.headline` rows.

    Returns:
        One sentence per role present (findings always).
    """
    claims = claim_verdicts(table)
    findings = claims[claims["role"] == FINDING]
    run = findings[~findings["verdict"].isin([NOT_RUN, decision.CANNOT_TEST])]
    found = run["verdict"].value_counts()
    first = "Claims of the study: " + ", ".join(f"{int(found.get(w, 0))} {w}" for w in FINDING_WORDS)
    apart = {
        decision.CANNOT_TEST: "cannot test (the design cannot test them)",
        NOT_RUN: "not run by this configuration",
    }
    for word, text in apart.items():
        n = int((findings["verdict"] == word).sum())
        first += f"; {n} {text} (listed last)" if n else ""
    for reading in READINGS:
        said = run[reading.claim_word].value_counts()
        if reading is not CHANCE and not set(said.index) - {NO_NULL}:
            continue
        title = "Beyond their nulls" if reading is CHANCE else reading.title[0].upper() + reading.title[1:]
        first += f". {title}: " + "; ".join(  # "; ": a word holds a comma (shown, negligible)
            f"{int(said.get(w, 0))} {w}" for w in (*BEYOND, MIXED, NOT_READ, NO_NULL) if w in said or w in BEYOND
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
        words = ", ".join(f"{int(met.get(w, 0))} {w}" for w in decision.PRECONDITION_WORDS.values())
        words += f", {int(met[MIXED])} {MIXED}" if MIXED in met else ""
        words += f"; {int(unread.sum())} not run" if unread.any() else ""
        lines.append(f"Preconditions: {words} ({HEADINGS[PRECONDITION][1]}).")
    return lines


def claims_markdown(table: pd.DataFrame) -> str:
    """One line per claim: its verdict as stated (and the original rule where its statistic replaced one), each
    reading a row carries, on which models, and its rows' tally."""
    claims = claim_verdicts(table)
    shown = [r for r in READINGS if r is CHANCE or set(claims[r.claim_word]) - {NO_NULL}]
    header = ["claim", "as stated", *(r.title for r in shown), "rows"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for rec in claims.to_dict("records"):
        name = rec["claim"] if rec["role"] == FINDING else f"{rec['claim']} ({rec['role']})"
        cells = [name, stated_text(rec)]
        for reading in shown:
            word, why = rec[reading.claim_word], rec[reading.why]
            cells.append(why if why.startswith(word) else word + (f": {why}" if why else ""))
        lines.append("| " + " | ".join(_cell(str(c)) for c in [*cells, rec["rows"]]) + " |")
    return "\n".join(lines) + "\n"


def stated_text(rec: dict[str, Any]) -> str:
    """A claim's as-stated cell: its word on its models, why it was not run or cannot be tested, and beside it the
    original rule's word where the statistic was chosen after the values were seen."""
    stated = f"{rec['verdict']} on {rec['models']}" if rec["models"] else rec["verdict"]
    if rec["verdict"] in (NOT_RUN, decision.CANNOT_TEST):
        stated += f" ({_reason(str(rec['why']), '')})"
    if rec.get("original"):
        stated = f"{rec['chosen_after']} (chosen after the values were seen): {stated}; {rec['original_rule']}: "
        stated += str(rec["original"])
    return stated


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
            "verdict": [_verdict_line(rec, view) for rec in view.to_dict("records")],
        }
    )


def _verdict_line(rec: dict[str, Any], view: pd.DataFrame) -> str:
    """``reproduced; beyond its null: shown; beyond the simplest feature (first-token profile): not shown``."""
    parts = [str(rec["verdict"])]
    for reading in READINGS:
        word = str(rec.get(reading.title, "") or "")
        if word:
            label = "null" if reading is CHANCE else reading.key
            name = str(rec.get(label, "") or "")
            parts.append(f"{reading.title}{f' ({name})' if reading is not CHANCE and name else ''}: {word}")
    return "; ".join(parts)


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
    reason = why.removeprefix(f"{NOT_RUN}:").removeprefix(f"{decision.CANNOT_TEST}:").strip()
    if model in PLACEHOLDER_MODELS or "," in model:
        return reason
    return re.sub(rf"(?<![\w.-]){re.escape(model)}(?![\w.-])", "the model", reason)
