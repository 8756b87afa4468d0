"""Tables for readers: Markdown rendering, the CSV + Markdown pair every analysis writes, and the one CSV
reader the workflow uses, which refuses a truncated or damaged table by name."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd


def write_table(
    df: pd.DataFrame,
    csv_path: str | os.PathLike,
    md_path: str | os.PathLike,
    *,
    title: str | None = None,
    markdown: pd.DataFrame | None = None,
) -> None:
    """Write ``df`` as CSV and as a Markdown table (``markdown`` instead, if given, e.g. a
    formatted view of the same rows), with an optional ``# title`` line."""
    write_csv(df, csv_path)
    heading = f"# {title}\n\n" if title else ""
    Path(md_path).write_text(heading + to_markdown(df if markdown is None else markdown))


class DamagedTableError(ValueError):
    """A CSV table that is not whole: cut short, or rows that do not match its header."""


def check_csv(text: str) -> None:
    """Raise :class:`DamagedTableError` unless ``text`` is a whole CSV table: it ends with a newline (a table
    cut mid-row does not) and every row has the header's number of fields.

    A table cut exactly at a row boundary passes; DVC's recorded hash is what catches that
    (``entropy-lens verify``).
    """
    if not text:
        raise DamagedTableError("the file is empty")
    if not text.endswith("\n"):
        raise DamagedTableError("the file does not end with a newline (cut short?)")
    try:
        rows = list(csv.reader(io.StringIO(text), strict=True))
    except csv.Error as err:
        raise DamagedTableError(f"not CSV: {err}") from None
    short = [i + 1 for i, row in enumerate(rows) if len(row) != len(rows[0])]
    if short:
        raise DamagedTableError(f"rows {short[:5]} do not have the header's {len(rows[0])} fields")


def read_csv_table(path: str | os.PathLike, **kwargs) -> pd.DataFrame:
    """Read a CSV table the workflow wrote, after :func:`check_csv`; ``kwargs`` go to :func:`pandas.read_csv`.

    Raises:
        DamagedTableError: naming the file, what is wrong and the remedy.
    """
    text = Path(path).read_text(encoding="utf-8")
    try:
        check_csv(text)
    except DamagedTableError as err:
        raise DamagedTableError(
            f"table {path} is damaged: {err}; rebuild it (snakemake --force {path}) or dvc pull its folder"
        ) from None
    return pd.read_csv(io.StringIO(text), **kwargs)


def write_csv(df: pd.DataFrame, path: str | os.PathLike, *, index: bool = False) -> None:
    """Write ``df`` as CSV to a temporary sibling, then rename it into place (a crash leaves no half table)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    df.to_csv(tmp, index=index)
    os.replace(tmp, path)


def to_markdown(df: pd.DataFrame, *, float_format: str = ".4g") -> str:
    """Render ``df`` as a GitHub-flavoured Markdown table (no index; NaN as blank).

    Args:
        df: Any frame.
        float_format: Format spec for float cells.

    Returns:
        The table text, ending with a newline.
    """
    header = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(_md_cell(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for rec in df.itertuples(index=False):
        lines.append("| " + " | ".join(_md_cell(_fmt(v, float_format)) for v in rec) + " |")
    return "\n".join(lines) + "\n"


def _fmt(value: object, float_format: str) -> str:
    if value is None or (np.isscalar(value) and pd.isna(value)):
        return ""
    if isinstance(value, (float, np.floating)):
        return format(float(value), float_format)
    return str(value)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def read_frames(paths: Sequence[str | os.PathLike]) -> pd.DataFrame | None:
    """The parquet files at ``paths`` stacked into one frame, or ``None`` when there are none."""
    return pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True) if len(paths) else None
