"""Reading users' own source files (jsonl, parquet, csv) through a column mapping.

Errors name the file and the missing column, bad line or empty row: a source is
never silently shrunk.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

LOCAL_SUFFIXES = (".jsonl", ".parquet", ".csv")


def read_local(path: str | os.PathLike, mapping: Mapping[str, str], *, optional: Collection[str] = ()) -> pd.DataFrame:
    """Read a user's jsonl / parquet / csv file, keeping and renaming the mapped columns.

    Args:
        path: A ``.jsonl``, ``.parquet`` or ``.csv`` file.
        mapping: ``{our column: their column}``, e.g. ``{"story_id": "id", "text": "story"}``.
        optional: Our columns of ``mapping`` the file may lack; they are left out when it does.

    Returns:
        A DataFrame with the columns ``mapping`` names (less absent optional ones), in its
        order; row ``i`` is the file's ``i``-th record (0-based).

    Raises:
        ValueError: naming the file and the missing column, the bad line, or the first
            row with an empty value.
    """
    if not mapping or not all(isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()):
        raise ValueError(f"mapping must be a non-empty {{our column: file column}} dict of str, got {mapping!r}")
    src = Path(path)
    raw = _read_frame(src)
    if raw.empty:
        raise ValueError(f"{src}: no rows under its header ({list(raw.columns)}); add one row per record")
    mapping = {ours: theirs for ours, theirs in mapping.items() if theirs in raw.columns or ours not in optional}
    missing = sorted({col for col in mapping.values() if col not in raw.columns})
    if missing:
        raise ValueError(
            f"{src}: no column {missing[0]!r} (mapped columns missing: {missing}); it has {list(raw.columns)}"
        )
    df = pd.DataFrame({ours: raw[theirs].to_numpy() for ours, theirs in mapping.items()})
    for ours, theirs in mapping.items():
        empty = df[ours].map(lambda v: v is None or (isinstance(v, float) and np.isnan(v)) or v == "").to_numpy(bool)
        if empty.any():
            raise ValueError(f"{src}: row {int(np.flatnonzero(empty)[0])} has no value in column {theirs!r}")
    return df


def _read_frame(src: Path) -> pd.DataFrame:
    suffix = src.suffix.lower()
    if suffix not in LOCAL_SUFFIXES:
        raise ValueError(f"{src}: unsupported file type {suffix!r}; use one of {LOCAL_SUFFIXES}")
    if not src.is_file():
        raise ValueError(f"{src}: no such file")
    if suffix == ".parquet":
        try:
            return pd.read_parquet(src)
        except (ValueError, OSError) as err:  # pyarrow: ArrowInvalid is a ValueError
            raise ValueError(f"{src}: not a readable Parquet file ({err}); write it again") from err
    _check_text(src)
    if suffix == ".csv":
        try:
            return pd.read_csv(src, dtype=str, keep_default_na=False)
        except pd.errors.EmptyDataError as err:
            raise ValueError(
                f"{src}: the file is empty; write a header line naming the columns, then the rows"
            ) from err
        except pd.errors.ParserError as err:
            raise ValueError(f"{src}: not a well-formed CSV file ({err}); fix the line it names") from err
    return pd.DataFrame([record for _, record in iter_jsonl(src)])


def _check_text(src: Path) -> None:
    """Raise naming the file, line and byte when ``src`` is not UTF-8 text."""
    data = src.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise ValueError(
            f"{src}:{line}: not UTF-8 text (byte {data[err.start]:#04x} at offset {err.start}: {err.reason}); "
            "save the file as UTF-8"
        ) from None


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line of a jsonl file.

    Raises:
        ValueError: naming the file and line of a line that is not a JSON object.
    """
    with open(path, encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({err.msg})") from err
            if not isinstance(record, dict):
                raise ValueError(f"{path}:{lineno}: expected a JSON object, got {type(record).__name__}")
            yield lineno, record


# What a hub dataset's column must hold, by the class name of its ``datasets`` feature (no import of datasets).
HUB_KINDS = {
    "text": ("Value",),
    "list": ("List", "Sequence", "LargeList"),
    "label": ("ClassLabel", "Value"),
    "class label": ("ClassLabel",),
    "image": ("Image",),
}


def check_hub_columns(features: Mapping, dataset: str, expected: Mapping[str, str]) -> None:
    """Check that a hub split has each expected column, holding the expected kind of feature.

    Args:
        features: The split's ``datasets.Features`` (a mapping of column to feature).
        dataset: The dataset, its configuration and split, for messages (``cais/mmlu all test``).
        expected: ``{column: kind}``, each kind a key of :data:`HUB_KINDS`.

    Raises:
        ValueError: naming the dataset, the column, what it holds and what was expected.
    """
    for column, kind in expected.items():
        if column not in features:
            raise ValueError(f"hub dataset {dataset} has no column {column!r} ({kind}); it has {sorted(features)}")
        found = type(features[column]).__name__
        text_ok = kind != "text" or getattr(features[column], "dtype", "") in ("string", "large_string")
        if found not in HUB_KINDS[kind] or not text_ok:
            raise ValueError(
                f"hub dataset {dataset}: column {column!r} holds {features[column]!r}, expected {kind} "
                f"({' or '.join(HUB_KINDS[kind])}); is this the dataset the loader reads?"
            )
