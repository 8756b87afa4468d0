"""Are two runs' results the same? Every store, table and tensor file of two results folders, compared statistic
by statistic, each within its tolerance (``entropy-lens compare A B``).

* **Stores** (``*.zarr``, per-model, combined, under a fitted lens): the same variables, dims and coordinates;
  integers and strings exactly, floats within their tolerance (NaN where NaN); attrs alike except the provenance
  that names the code (``git_sha``, ``versions``, ``entropy_lens_version``). Read variable by variable, lazily,
  so a store larger than memory compares.
* **Tables** (CSV and Parquet, under ``tables/``, ``datasets/``, ``scores/``, ``layer_skip/``...): the same columns
  and rows; numbers within their column's tolerance, everything else exactly. Tables of measured time and memory
  (``run_timings``, ``plan_vs_run``, ``benchmarks/``) differ by nature and are left out.
* **Tensor files** (``*.safetensors``: fitted lenses): the same tensors, within their tolerance.

A tolerance is relative, ``|a - b| <= rtol * |b|``: one default for every statistic, and one per statistic (a
store variable, a table column or a tensor) where a known source of drift (another host's kernels) warrants it.
A comparison that found nothing to compare is refused (:class:`NothingToCompareError`), never called agreement.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from entropy_lens.store import storage
from entropy_lens.store.tensors import load_tensors

PROVENANCE_ATTRS = frozenset({"git_sha", "versions", "entropy_lens_version"})
# Measured run time and memory: they differ between any two runs.
SKIPPED_TABLES = frozenset({"run_timings", "plan_vs_run"})
SKIPPED_FOLDERS = frozenset({"benchmarks"})
TABLE_SUFFIXES = (".csv", ".parquet")
TENSOR_SUFFIX = ".safetensors"
STORE_SUFFIX = ".zarr"
# Rows named in a difference line, at most.
SHOWN_ROWS = 5


class NothingToCompareError(ValueError):
    """Neither folder holds a store, table or tensor file: agreement would be claimed after comparing nothing."""


@dataclass(frozen=True)
class Tolerances:
    """Relative tolerances: ``default`` for every float statistic, ``by_name`` for named ones."""

    default: float = 0.0
    by_name: Mapping[str, float] = field(default_factory=dict)

    def of(self, name: str) -> float:
        return float(self.by_name.get(name, self.default))

    def describe(self) -> str:
        named = ", ".join(f"{name} {value:g}" for name, value in sorted(self.by_name.items()))
        base = "exact" if self.default == 0 else f"rtol {self.default:g}"
        return f"{base} ({named})" if named else base


@dataclass(frozen=True)
class Comparison:
    """What :func:`compare_results` compared and the differences it found, one line each."""

    stores: int
    tables: int
    tensors: int
    statistics: int
    differences: tuple[str, ...]
    tolerances: Tolerances

    @property
    def same(self) -> bool:
        return not self.differences

    def summary(self) -> str:
        compared = (
            f"{self.stores} stores, {self.tables} tables and {self.tensors} tensor files compared "
            f"({self.statistics} statistics, tolerance {self.tolerances.describe()})"
        )
        return f"{compared}: " + (f"{len(self.differences)} differences" if self.differences else "no difference")


def results_folder(path: str | os.PathLike) -> Path:
    """The results folder of ``path``: ``path/results`` when ``path`` is a run's working directory, else ``path``.

    Raises:
        FileNotFoundError: when ``path`` is no folder.
    """
    base = Path(path)
    if not base.is_dir():
        raise FileNotFoundError(f"no folder at {base}; give two results folders (e.g. results other/results)")
    return base / "results" if (base / "results").is_dir() else base


def compare_results(a: str | os.PathLike, b: str | os.PathLike, tolerances: Tolerances | None = None) -> Comparison:
    """Every difference between the results of two runs (results folders or their working directories).

    Raises:
        NothingToCompareError: when neither folder holds a store, table or tensor file.
    """
    tol = tolerances or Tolerances()
    left, right = results_folder(a), results_folder(b)
    found = {kind: _pairs(_artifacts(left, kind), _artifacts(right, kind)) for kind in ("store", "table", "tensor")}
    if not any(found.values()):
        raise NothingToCompareError(
            f"nothing to compare: neither {left} nor {right} holds a store, table or tensor file; give the results "
            "folders of two runs (e.g. results and ../other/results)"
        )
    compare = {"store": compare_stores, "table": compare_tables, "tensor": compare_tensors}
    differences, statistics = [], 0
    for kind, pairs in found.items():
        for name, (x, y) in pairs.items():
            if x is None or y is None:
                differences.append(f"{name}: only in {left if y is None else right}")
                continue
            lines, n = compare[kind](x, y, tol)
            statistics += n
            differences += [f"{name}: {line}" for line in lines]
    counts = [len(found[kind]) for kind in ("store", "table", "tensor")]
    return Comparison(*counts, statistics, tuple(differences), tol)


def _artifacts(root: Path, kind: str) -> dict[str, Path]:
    """Relative name -> path of every store, table or tensor file under ``root`` that is compared."""
    return {path.relative_to(root).as_posix(): path for path in _walk(root, kind)}


def _walk(root: Path, kind: str) -> Iterator[Path]:
    if kind == "store":
        yield from (p for p in sorted(root.rglob(f"*{STORE_SUFFIX}")) if p.is_dir() and _kept(root, p))
        return
    suffixes = TABLE_SUFFIXES if kind == "table" else (TENSOR_SUFFIX,)
    for path in sorted(root.rglob("*")):
        if path.suffix in suffixes and path.is_file() and _kept(root, path) and path.stem not in SKIPPED_TABLES:
            yield path


def _kept(root: Path, path: Path) -> bool:
    parts = path.relative_to(root).parts
    return parts[0] not in SKIPPED_FOLDERS and not any(part.endswith(STORE_SUFFIX) for part in parts[:-1])


def _pairs(left: dict[str, Path], right: dict[str, Path]) -> dict[str, tuple[Path | None, Path | None]]:
    return {name: (left.get(name), right.get(name)) for name in sorted(set(left) | set(right))}


def compare_stores(a: Path, b: Path, tol: Tolerances) -> tuple[list[str], int]:
    """(differences, statistics compared) between two Zarr stores, one variable in memory at a time."""
    with storage.snakemake_timestamp_ignored():
        x, y = xr.open_zarr(a, consolidated=False), xr.open_zarr(b, consolidated=False)
    problems, n = [], 0
    for kind, left, right in (("variable", x.data_vars, y.data_vars), ("coordinate", x.coords, y.coords)):
        problems += [f"{kind} {name!r} in only one run" for name in sorted(set(left) ^ set(right))]
        for name in sorted(set(left) & set(right)):
            n += 1
            if left[name].dims != right[name].dims or left[name].shape != right[name].shape:
                problems.append(f"{kind} {name!r}: dims {dict(left[name].sizes)} vs {dict(right[name].sizes)}")
                continue
            why = _array_difference(left[name], right[name], tol.of(name))
            if why:
                problems.append(f"{kind} {name!r}: {why}")
    for key in sorted((set(x.attrs) | set(y.attrs)) - PROVENANCE_ATTRS):
        if x.attrs.get(key) != y.attrs.get(key):
            problems.append(f"attr {key!r}: {x.attrs.get(key)!r} vs {y.attrs.get(key)!r}")
    return problems, n


def _array_difference(a: xr.DataArray, b: xr.DataArray, rtol: float) -> str:
    """Why two arrays of one shape differ ("" when they agree): floats within ``rtol``, NaN where NaN."""
    if a.dtype.kind == "f" and b.dtype.kind == "f":
        nan_a, nan_b = a.isnull(), b.isnull()
        gap = abs(a - b)
        bad = (gap > rtol * abs(b)) | (nan_a != nan_b)
        n_bad = int(bad.sum())
        if not n_bad:
            return ""
        worst = float(gap.where(~(nan_a | nan_b)).max())
        return f"{n_bad} of {a.size} values differ, by up to {worst:.3g} (tolerance {_rtol(rtol)})"
    if a.dtype.kind in "iub" and b.dtype.kind in "iub":
        n_bad = int((a != b).sum())
    else:  # strings and objects (coordinates: prompt texts, labels), small
        n_bad = int((storage.as_str(a.values) != storage.as_str(b.values)).sum())
    return f"{n_bad} of {a.size} values differ" if n_bad else ""


def _rtol(rtol: float) -> str:
    return "exact" if rtol == 0 else f"rtol {rtol:g}"


def _read_table(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    return pd.read_csv(path, keep_default_na=False)


def compare_tables(a: Path, b: Path, tol: Tolerances) -> tuple[list[str], int]:
    """(differences, columns compared) between two CSV or Parquet tables."""
    x, y = _read_table(a), _read_table(b)
    if list(x.columns) != list(y.columns):
        return [f"columns {list(x.columns)} vs {list(y.columns)}"], 0
    if len(x) != len(y):
        return [f"{len(x)} rows vs {len(y)}"], 0
    problems = []
    for column in x.columns:
        why = _column_difference(x[column], y[column], tol.of(column))
        if why:
            problems.append(f"column {column!r}: {why}")
    return problems, len(x.columns)


def _column_difference(x: pd.Series, y: pd.Series, rtol: float) -> str:
    """Why two columns differ ("" when they agree): numbers within ``rtol`` (NaN where NaN), the rest exactly."""
    left, right = pd.to_numeric(x, errors="coerce"), pd.to_numeric(y, errors="coerce")
    numeric = (left.notna() & right.notna()).to_numpy()
    gap = np.abs(left.to_numpy(float) - right.to_numpy(float))
    bad_numbers = numeric & (gap > rtol * np.abs(right.to_numpy(float)))
    bad_text = ~numeric & (x.astype(str).to_numpy() != y.astype(str).to_numpy())
    rows = np.flatnonzero(bad_numbers | bad_text)
    if not len(rows):
        return ""
    shown = ", ".join(map(str, rows[:SHOWN_ROWS])) + (", ..." if len(rows) > SHOWN_ROWS else "")
    by = f", numbers by up to {gap[bad_numbers].max():.3g} (tolerance {_rtol(rtol)})" if bad_numbers.any() else ""
    return f"{len(rows)} of {len(x)} rows differ (rows {shown}){by}"


def compare_tensors(a: Path, b: Path, tol: Tolerances) -> tuple[list[str], int]:
    """(differences, tensors compared) between two safetensors files (fitted lenses)."""
    (x, _), (y, _) = load_tensors(a), load_tensors(b)
    problems = [f"tensor {name!r} in only one run" for name in sorted(set(x) ^ set(y))]
    for name in sorted(set(x) & set(y)):
        left, right = x[name].float().numpy(), y[name].float().numpy()
        if left.shape != right.shape:
            problems.append(f"tensor {name!r}: shape {left.shape} vs {right.shape}")
            continue
        rtol = tol.of(name)
        gap = np.abs(left - right)
        n_bad = int((gap > rtol * np.abs(right)).sum())
        if n_bad:
            problems.append(
                f"tensor {name!r}: {n_bad} of {left.size} values differ, by up to {gap.max():.3g} "
                f"(tolerance {_rtol(rtol)})"
            )
    return problems, len(set(x) & set(y))


_TOLERANCE = re.compile(r"^([\w.-]+)=([0-9.eE+-]+)$")


def parse_tolerance(text: str) -> tuple[str, float]:
    """``NAME=RTOL`` (``entropy=1e-3``) -> (name, rtol).

    Raises:
        ValueError: naming the text when it is not ``NAME=RTOL`` with a number of at least 0.
    """
    match = _TOLERANCE.match(text.strip())
    try:
        value = float(match.group(2)) if match else -1.0
    except ValueError:
        value = -1.0
    if not match or not value >= 0:
        raise ValueError(
            f"tolerance {text!r} is not NAME=RTOL (a statistic and a relative tolerance >= 0, e.g. auc=1e-3)"
        )
    return match.group(1), value
