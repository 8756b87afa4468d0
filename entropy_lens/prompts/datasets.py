"""Prompt tables: the column contract, validation, parquet I/O and the simple builders.

A prompt table is a :class:`pandas.DataFrame` with one row per prompt: a stable,
unique ``prompt_id`` derived from the row's labels, the ``prompt`` text (before any
chat template) and the label columns of its kind:

=========  ==============================================================================
kind       label columns
=========  ==============================================================================
tasks      task (str), phrasing (int 1/2), template (str), scrambled (bool), story_id (str)
formats    format (str), topic (str)
mmlu       style (str), subject (str), question_id (str), question (str), answer (A-D),
           choice_a .. choice_d (str)
blank      sample (int), seed (int); the prompt is ``""`` (the model's BOS token alone)
images     label (str), source (str), image (bytes: the encoded file); the prompt text is
           where the image came from (a relative path or ``hub:<id>/<split>/<row>``)
=========  ==============================================================================

Extra columns are allowed and kept.  :func:`write_table` validates before writing and
writes atomically; :func:`read_table` validates on read.  JSON-safe table attrs (e.g.
the provenance of synthetic stories) travel in the parquet metadata as ``df.attrs``.

Builders: :func:`build_formats`, :func:`build_blank` here; ``tasks`` in
:mod:`entropy_lens.prompts.tasks`; ``mmlu`` in :mod:`entropy_lens.prompts.mmlu`; ``images`` in
:mod:`entropy_lens.prompts.images`; story sources
(hub, offline generator) in :mod:`entropy_lens.prompts.stories`; users' own files are read
by :func:`entropy_lens.prompts.sources.read_local`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

logger = logging.getLogger(__name__)

PROMPT_ID = "prompt_id"
PROMPT_TEXT = "prompt_text"  # the store's word for it (schema.PROMPT_TEXT)
# tasks
TASK = "task"
PHRASING = "phrasing"
TEMPLATE = "template"
SCRAMBLED = "scrambled"
STORY_ID = "story_id"
# formats
FORMAT = "format"
TOPIC = "topic"
# mmlu
STYLE = "style"
SUBJECT = "subject"
QUESTION_ID = "question_id"
QUESTION = "question"
ANSWER = "answer"
CHOICE_A, CHOICE_B, CHOICE_C, CHOICE_D = "choice_a", "choice_b", "choice_c", "choice_d"
CHOICES = (CHOICE_A, CHOICE_B, CHOICE_C, CHOICE_D)
LETTERS = ("A", "B", "C", "D")
STYLES = ("base", "instruct", "explain")
# blank
SAMPLE = "sample"
SEED = "seed"
# images
LABEL = "label"
SOURCE = "source"
IMAGE = "image"
# story sources
TEXT = "text"

TASK_QUESTIONS: dict[str, tuple[str, str]] = {
    "continue": ("How can the story be continued?", "Which could be a continuation of the story?"),
    "count": ("How many words are in the story?", "Count the number of words in the story."),
    "gist": ("What is the main idea of the story?", "Who is the subject of the story?"),
}
TASK_TEMPLATES: dict[str, str] = {
    "story_first": "{story}\n\n{question}",
    "question_first": "{question}\n\n{story}",
}
FORMAT_TEMPLATES: dict[str, str] = {
    "poem": "Write a poem about {topic}",
    "blurb": "Write a scientific blurb about {topic}",
    "chat": "Simulate a chat log about {topic}",
}
TOPICS_RESOURCE = "data/topics.txt"
ATTRS_KEY = b"entropy_lens"


@dataclass(frozen=True)
class Column:
    """One label column: its value type and, where closed, its allowed values."""

    name: str
    kind: type
    allowed: tuple | None = None


KINDS: dict[str, tuple[Column, ...]] = {
    "tasks": (
        Column(TASK, str, tuple(TASK_QUESTIONS)),
        Column(PHRASING, int, (1, 2)),
        Column(TEMPLATE, str, tuple(TASK_TEMPLATES)),
        Column(SCRAMBLED, bool),
        Column(STORY_ID, str),
    ),
    "formats": (Column(FORMAT, str, tuple(FORMAT_TEMPLATES)), Column(TOPIC, str)),
    "mmlu": (
        Column(STYLE, str, STYLES),
        Column(SUBJECT, str),
        Column(QUESTION_ID, str),
        Column(QUESTION, str),
        Column(ANSWER, str, LETTERS),
        *(Column(c, str) for c in CHOICES),
    ),
    "blank": (Column(SAMPLE, int), Column(SEED, int)),
    "images": (Column(LABEL, str), Column(SOURCE, str), Column(IMAGE, bytes)),
}


# The column naming each prompt's source, the unit a prompt is not independent within (docs/verdicts.md, "The right
# units"): a story's prompts, a topic's formats, a question's styles; a blank sample or an image's own file is its
# own source. The kNN's grouped folds and the expansion intervals resample these; the cross-prompt partner is a
# prompt of another one.
SOURCE_COLUMNS: dict[str, str] = {
    "tasks": STORY_ID,
    "formats": TOPIC,
    "mmlu": QUESTION_ID,
    "blank": PROMPT_ID,
    "images": SOURCE,
}


def source_column(kind: str) -> str:
    """The column of a ``kind`` table naming each prompt's source (:data:`SOURCE_COLUMNS`)."""
    _columns_of(kind)
    return SOURCE_COLUMNS[kind]


def label_columns(kind: str) -> tuple[str, ...]:
    """Names of the label columns of ``kind`` (in table order)."""
    return tuple(c.name for c in _columns_of(kind))


def _columns_of(kind: str) -> tuple[Column, ...]:
    if kind not in KINDS:
        raise ValueError(f"unknown table kind {kind!r}; use one of {sorted(KINDS)}")
    return KINDS[kind]


def validate_table(df: pd.DataFrame, kind: str) -> None:
    """Check ``df`` against the contract of ``kind``.

    Raises:
        TypeError: when ``df`` is not a DataFrame.
        ValueError: naming the column and the first bad row (index and prompt id).
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"a {kind} table must be a pandas DataFrame, got {type(df).__name__}")
    columns = (Column(PROMPT_ID, str), Column(PROMPT_TEXT, str), *_columns_of(kind))
    missing = [c.name for c in columns if c.name not in df.columns]
    if missing:
        raise ValueError(f"{kind} table lacks columns {missing}; it has {list(df.columns)}")
    if df.empty:
        raise ValueError(f"{kind} table has no rows")
    for column in columns:
        _check_column(df, column, kind)
    _check_ids(df, kind)
    _check_prompts(df, kind)


def _check_column(df: pd.DataFrame, column: Column, kind: str) -> None:
    values = df[column.name]
    if column.kind is bool:
        ok = pd.api.types.is_bool_dtype(values.dtype)
    elif column.kind is int:
        ok = pd.api.types.is_integer_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values.dtype)
    else:
        ok = True
    if not ok:
        raise ValueError(
            f"{kind} table column {column.name!r} has dtype {values.dtype}, expected {column.kind.__name__}"
        )
    if column.kind is str:
        bad = ~values.map(lambda v: isinstance(v, str)).to_numpy(bool)
        _raise_at(df, bad, kind, f"column {column.name!r} must hold strings")
    if column.kind is bytes:
        bad = ~values.map(lambda v: isinstance(v, bytes) and len(v) > 0).to_numpy(bool)
        _raise_at(df, bad, kind, f"column {column.name!r} must hold the encoded image (non-empty bytes)")
    if column.allowed is not None:
        bad = ~values.isin(column.allowed).to_numpy(bool)
        _raise_at(df, bad, kind, f"column {column.name!r} must be one of {list(column.allowed)}")


def _check_ids(df: pd.DataFrame, kind: str) -> None:
    ids = df[PROMPT_ID]
    _raise_at(df, (ids == "").to_numpy(bool), kind, f"column {PROMPT_ID!r} must not be empty")
    _raise_at(df, ids.duplicated().to_numpy(bool), kind, f"column {PROMPT_ID!r} must be unique")


def _check_prompts(df: pd.DataFrame, kind: str) -> None:
    empty = (df[PROMPT_TEXT] == "").to_numpy(bool)
    if kind == "blank":
        _raise_at(df, ~empty, kind, f"column {PROMPT_TEXT!r} must be '' (the BOS token alone)")
    else:
        _raise_at(df, empty, kind, f"column {PROMPT_TEXT!r} must not be empty")


def _raise_at(df: pd.DataFrame, bad: np.ndarray, kind: str, what: str) -> None:
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        pid = df[PROMPT_ID].iloc[row] if PROMPT_ID in df else None
        raise ValueError(
            f"{kind} table: {what}; row {row} (prompt_id {pid!r}) breaks it ({int(bad.sum())} bad rows in all)"
        )


def write_table(df: pd.DataFrame, path: str | os.PathLike, kind: str, attrs: Mapping | None = None) -> Path:
    """Validate ``df`` and write it as parquet, atomically (temporary file + rename).

    Args:
        df: A prompt table of ``kind``.
        path: Destination ``.parquet`` file; parent folders are created.
        kind: Table kind (``tasks``, ``formats``, ``mmlu``, ``blank``).
        attrs: JSON-safe table attrs (default ``df.attrs``), read back as ``df.attrs``.

    Returns:
        The written path.
    """
    validate_table(df, kind)
    out = write_parquet(df, path, dict(df.attrs if attrs is None else attrs, table_kind=kind))
    logger.info("wrote %d %s prompts to %s", len(df), kind, out)
    return out


def write_parquet(df: pd.DataFrame, path: str | os.PathLike, attrs: Mapping) -> Path:
    """Write ``df`` as parquet atomically (temporary file + rename), ``attrs`` as JSON metadata."""
    try:
        encoded = json.dumps(dict(attrs), allow_nan=False, sort_keys=True).encode()
    except (TypeError, ValueError) as err:
        raise ValueError(f"table attrs must be JSON-safe ({err}); convert them to str/int/float/bool") from err
    import pyarrow as pa  # the parquet stack only where a table is written or read: the column contract above is
    import pyarrow.parquet as pq  # read by the verdicts and the workflow's parse, which touch no parquet file

    table = pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), ATTRS_KEY: encoded})
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return out


def read_parquet(path: str | os.PathLike) -> pd.DataFrame:
    """Read a parquet file written by :func:`write_parquet`; its attrs come back as ``df.attrs``."""
    import pyarrow.parquet as pq  # see write_parquet

    table = pq.read_table(path)
    df = table.to_pandas()
    raw = (table.schema.metadata or {}).get(ATTRS_KEY)
    df.attrs = json.loads(raw) if raw else {}
    return df


def read_table(path: str | os.PathLike, kind: str) -> pd.DataFrame:
    """Read a prompt table written by :func:`write_table` and validate it as ``kind``.

    The table attrs come back as ``df.attrs``.
    """
    df = read_parquet(path)
    stored = df.attrs.pop("table_kind", kind)
    if stored != kind:
        raise ValueError(f"{path} holds a {stored!r} table, not {kind!r}")
    try:
        validate_table(df, kind)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from err
    return df


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from ``parts`` (stable across processes, unlike ``hash``)."""
    digest = hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def slug(text: str) -> str:
    """Lower-case ``text`` with runs of non-alphanumerics turned into single ``-``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def load_topics() -> list[str]:
    """The topic list shipped with the package (``entropy_lens/data/topics.txt``)."""
    return _parse_topics(resources.files("entropy_lens").joinpath(TOPICS_RESOURCE).read_text(encoding="utf-8"))


def _parse_topics(text: str) -> list[str]:
    lines = (line.strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def build_formats(topics: Sequence[str], *, formats: Sequence[str] = tuple(FORMAT_TEMPLATES)) -> pd.DataFrame:
    """The ``formats`` table: every format template over every topic.

    Raises:
        ValueError: on an unknown format, an empty topic or two topics with the same slug.
    """
    unknown = [f for f in formats if f not in FORMAT_TEMPLATES]
    if unknown:
        raise ValueError(f"unknown formats {unknown}; use some of {list(FORMAT_TEMPLATES)}")
    seen: dict[str, str] = {}
    for topic in topics:
        key = slug(topic) if isinstance(topic, str) else ""
        if not key:
            raise ValueError(f"topic {topic!r} is empty or has no letters/digits")
        if key in seen:
            raise ValueError(f"topics {seen[key]!r} and {topic!r} give the same prompt id {key!r}; drop one")
        seen[key] = topic
    rows = [
        {
            PROMPT_ID: f"formats-{fmt}-{slug(topic)}",
            PROMPT_TEXT: FORMAT_TEMPLATES[fmt].format(topic=topic),
            FORMAT: fmt,
            TOPIC: topic,
        }
        for fmt in formats
        for topic in topics
    ]
    return pd.DataFrame(rows)


def sample_topics(n_topics: int, seed: int, topics: Sequence[str] | None = None) -> list[str]:
    """``n_topics`` of the shipped topics (or of ``topics``), drawn with ``seed`` and sorted; 0 = all."""
    pool = list(load_topics() if topics is None else topics)
    if not isinstance(n_topics, int) or not 0 <= n_topics <= len(pool):
        raise ValueError(f"n_topics must be an integer in 0..{len(pool)} (0 = all topics), got {n_topics!r}")
    if n_topics == 0:
        return pool
    return sorted(np.random.default_rng(seed).choice(pool, n_topics, replace=False).tolist())


def build_blank(n_samples: int, seed: int) -> pd.DataFrame:
    """The ``blank`` table: ``n_samples`` empty prompts with per-sample seeds.

    ``seed`` of sample ``i`` is ``derive_seed(seed, "blank", i)``; the prompt is ``""``
    (the extractor feeds the model's BOS token alone).
    """
    if not isinstance(n_samples, int) or n_samples <= 0:
        raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}")
    samples = np.arange(n_samples, dtype=np.int64)
    return pd.DataFrame(
        {
            PROMPT_ID: [f"blank-{i:04d}" for i in samples],
            PROMPT_TEXT: [""] * n_samples,
            SAMPLE: samples,
            SEED: np.asarray([derive_seed(seed, "blank", i) for i in samples], dtype=np.int64),
        }
    )
