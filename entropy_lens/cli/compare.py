"""``entropy-lens compare A B``: are two runs' results the same, statistic by statistic, within tolerances?"""

from __future__ import annotations

import argparse

from entropy_lens.store.compare import Tolerances, compare_results, parse_tolerance


def add_compare_parser(sub: argparse._SubParsersAction) -> None:
    """The ``compare`` subcommand's arguments."""
    cmp = sub.add_parser(
        "compare",
        help="compare every store, table and lens of two runs' results folders; exit 1 on a difference, 2 when "
        "there is nothing to compare",
    )
    cmp.add_argument("a", help="results folder of a run (or its working directory)")
    cmp.add_argument("b", help="the results folder of the other run")
    cmp.add_argument(
        "--rtol",
        type=float,
        default=0.0,
        help="relative tolerance of every float statistic (default 0: exact, as two runs on one host give); "
        "runs on other hosts or in other dtypes need one",
    )
    cmp.add_argument(
        "--tolerance",
        action="append",
        default=[],
        metavar="NAME=RTOL",
        help="the relative tolerance of one statistic (a store variable, table column or tensor), e.g. "
        "entropy=1e-3; repeat for several",
    )


def compare_command(args: argparse.Namespace) -> int:
    """Print one line per difference and the summary; 0 when the runs agree, 1 when they differ."""
    if args.rtol < 0:
        raise ValueError(f"--rtol must be at least 0, got {args.rtol}")
    tolerances = Tolerances(args.rtol, dict(parse_tolerance(text) for text in args.tolerance))
    comparison = compare_results(args.a, args.b, tolerances)
    for line in comparison.differences:
        print(line)
    print(comparison.summary())
    return 0 if comparison.same else 1
