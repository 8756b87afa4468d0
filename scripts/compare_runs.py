#!/usr/bin/env python
"""Compare the stores and tables of two workflow runs: are they the same results?

    python scripts/compare_runs.py RUN_A RUN_B [--rtol 1e-5] [--ignore-table run_timings]

RUN_A and RUN_B are working directories of two runs (each with ``results/``).  Every
Zarr store under ``results/profiles`` and every CSV under ``results/tables`` present in
either run is compared:

* stores: same variables, dims, coordinates and label values; integer and string data
  exactly, float data within ``rtol`` (NaN where NaN); attrs alike except provenance
  that names the code or the run (``git_sha``, ``versions``, ``entropy_lens_version``);
* tables: same columns and rows; numbers within ``rtol``, everything else exactly.

Prints one line per difference and exits 1 if any; 0 when the runs agree.  Timing tables
(``run_timings``, benchmarks) differ by nature and are skipped by default.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

PROVENANCE_ATTRS = ("git_sha", "versions", "entropy_lens_version")
SKIPPED_TABLES = ("run_timings",)


def _stores(root: Path) -> dict[str, Path]:
    base = root / "results" / "profiles"
    return {str(p.relative_to(base)): p for p in sorted(base.rglob("*.zarr"))} if base.is_dir() else {}


def _tables(root: Path, skipped: tuple[str, ...]) -> dict[str, Path]:
    base = root / "results" / "tables"
    files = sorted(base.glob("*.csv")) if base.is_dir() else []
    return {p.name: p for p in files if p.stem not in skipped}


def _same_values(a: np.ndarray, b: np.ndarray, rtol: float) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "f" and b.dtype.kind == "f":
        return bool(np.allclose(a, b, rtol=rtol, atol=0.0, equal_nan=True))
    return bool(np.array_equal(a.astype(object), b.astype(object)))


def compare_stores(a: Path, b: Path, rtol: float) -> list[str]:
    """Differences between two Zarr stores (empty when they agree)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Snakemake's timestamp marker inside a directory output
        x, y = xr.open_zarr(a, consolidated=False).load(), xr.open_zarr(b, consolidated=False).load()
    problems = []
    for kind, left, right in (("variable", x.data_vars, y.data_vars), ("coordinate", x.coords, y.coords)):
        for name in sorted(set(left) ^ set(right)):
            problems.append(f"{kind} {name!r} in only one run")
        for name in sorted(set(left) & set(right)):
            if left[name].dims != right[name].dims:
                problems.append(f"{kind} {name!r}: dims {left[name].dims} vs {right[name].dims}")
            elif not _same_values(np.asarray(left[name].values), np.asarray(right[name].values), rtol):
                problems.append(f"{kind} {name!r} differs")
    for key in sorted((set(x.attrs) | set(y.attrs)) - set(PROVENANCE_ATTRS)):
        if x.attrs.get(key) != y.attrs.get(key):
            problems.append(f"attr {key!r}: {x.attrs.get(key)!r} vs {y.attrs.get(key)!r}")
    return problems


def compare_tables(a: Path, b: Path, rtol: float) -> list[str]:
    """Differences between two CSV tables (empty when they agree)."""
    x, y = pd.read_csv(a, keep_default_na=False), pd.read_csv(b, keep_default_na=False)
    if list(x.columns) != list(y.columns):
        return [f"columns {list(x.columns)} vs {list(y.columns)}"]
    if len(x) != len(y):
        return [f"{len(x)} rows vs {len(y)}"]
    problems = []
    for column in x.columns:
        left, right = pd.to_numeric(x[column], errors="coerce"), pd.to_numeric(y[column], errors="coerce")
        numeric = left.notna() & right.notna()
        if not np.allclose(left[numeric], right[numeric], rtol=rtol, atol=0.0):
            problems.append(f"column {column!r}: numbers differ")
        if not (x.loc[~numeric, column].astype(str) == y.loc[~numeric, column].astype(str)).all():
            problems.append(f"column {column!r}: values differ")
    return problems


def compare_runs(a: Path, b: Path, *, rtol: float, skipped: tuple[str, ...] = SKIPPED_TABLES) -> list[str]:
    """Every difference between the results of two runs, as ``"<file>: <what>"`` lines."""
    problems = []
    for name, (left, right) in _pairs(_stores(a), _stores(b)).items():
        problems += [f"{name}: {p}" for p in (compare_stores(left, right, rtol) if left and right else ["missing"])]
    for name, (left, right) in _pairs(_tables(a, skipped), _tables(b, skipped)).items():
        problems += [f"{name}: {p}" for p in (compare_tables(left, right, rtol) if left and right else ["missing"])]
    return problems


def _pairs(left: dict[str, Path], right: dict[str, Path]) -> dict[str, tuple[Path | None, Path | None]]:
    return {name: (left.get(name), right.get(name)) for name in sorted(set(left) | set(right))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    parser.add_argument("--rtol", type=float, default=1e-5, help="relative tolerance for float values")
    parser.add_argument("--ignore-table", action="append", default=list(SKIPPED_TABLES), help="table stem to skip")
    args = parser.parse_args(argv)
    problems = compare_runs(args.run_a, args.run_b, rtol=args.rtol, skipped=tuple(args.ignore_table))
    n_stores, n_tables = len(_stores(args.run_a)), len(_tables(args.run_a, tuple(args.ignore_table)))
    for line in problems:
        print(line)
    verdict = f"{len(problems)} differences" if problems else "no difference"
    print(f"{n_stores} stores and {n_tables} tables compared: {verdict}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
