"""Tables for readers: Markdown rendering and the CSV + Markdown pair every analysis writes."""

from __future__ import annotations

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
    df.to_csv(csv_path, index=False)
    heading = f"# {title}\n\n" if title else ""
    Path(md_path).write_text(heading + to_markdown(df if markdown is None else markdown))


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
