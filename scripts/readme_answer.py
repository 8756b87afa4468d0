"""Write a run's headline into the README between its markers, so the answer shown is the run's, not a copy.

    python scripts/readme_answer.py RESULTS_DIR SECTION [--readme README.md]

Reads ``RESULTS_DIR/tables/verdicts.csv`` (the headline ``paper_table`` writes) and replaces the text between
``<!-- answer:SECTION begin -->`` and ``<!-- answer:SECTION end -->`` with its counts and one line per claim
(how many rows got each verdict, on which models); every estimate with its 95% interval is in the run's
``tables/verdicts.md``, which the section links; where the run read verdicts under a fitted lens
(``tables/lens_robustness.csv``), a line per lens kind counting those that change; where it scored drop sets
(``tables/skip_drop_scores.csv``), a line per model saying which blocks can be dropped, by which criterion, at
what cost (:func:`entropy_lens.verdicts.claims.drop_sets.drop_line`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from entropy_lens.answers.letters import VERDICT_MEASURE
from entropy_lens.verdicts.claims.drop_sets import drop_line
from entropy_lens.verdicts.render import digest_markdown
from entropy_lens.verdicts.robustness import robustness_lines


def replace_section(text: str, section: str, body: str) -> str:
    """``text`` with the part between the section's markers replaced by ``body``."""
    begin, end = f"<!-- answer:{section} begin -->", f"<!-- answer:{section} end -->"
    if begin not in text or end not in text:
        raise ValueError(f"the README has no markers {begin!r} ... {end!r}; add them where the answer goes")
    head, rest = text.split(begin, 1)
    return f"{head}{begin}\n{body}\n{end}{rest.split(end, 1)[1]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="a run's results folder (results, runs/study/results)")
    parser.add_argument("section", help="the marker name in the README (default, study)")
    parser.add_argument("--readme", default="README.md")
    args = parser.parse_args(argv)
    source = Path(args.results) / "tables" / "verdicts.csv"
    if not source.is_file():
        print(f"readme_answer: no headline at {source}; run the workflow first", file=sys.stderr)
        return 2
    table = pd.read_csv(source, keep_default_na=False)  # empty cells stay "" (the renderer reads them as missing)
    full = source.with_suffix(".md").as_posix()
    body = f"*Generated from `{source.as_posix()}` by `scripts/readme_answer.py`; every estimate with its 95% "
    body += f"interval: `{full}`.*\n\n" + digest_markdown(table)
    robustness = source.with_name("lens_robustness.csv")
    if robustness.is_file():  # fitted_lens.profile_datasets: one line per fitted kind
        changes = pd.read_csv(robustness, keep_default_na=False)
        lines = robustness_lines(changes)
        body += "\n" + " ".join(lines) + f" Per row and block: `{robustness.with_suffix('.md').as_posix()}`.\n"
    drops = source.with_name("skip_drop_scores.csv")
    if drops.is_file():  # layer_skip.drop_shares: which blocks to drop, per model
        line = drop_line(pd.read_csv(drops, dtype={"layers": str}), VERDICT_MEASURE)
        body += f"\n{line} Every set: `{drops.with_suffix('.md').as_posix()}`.\n" if line else ""
    readme = Path(args.readme)
    readme.write_text(replace_section(readme.read_text(encoding="utf-8"), args.section, body), encoding="utf-8")
    print(f"wrote the {args.section} answer ({len(table)} rows) into {readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
