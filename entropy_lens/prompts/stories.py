"""Story sources for the ``tasks`` set: the TinyStories hub split and an offline generator.

Offline, no package ships TinyStories text, so :func:`generate_stories` writes a
TinyStories-like corpus with an embedded model from seeded openings.  Those stories
are synthetic, and their provenance (``synthetic=True``, the generating model and
settings) must travel with every table and store built from them.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from entropy_lens.prompts.datasets import STORY_ID, TEXT, read_parquet, write_parquet
from entropy_lens.prompts.hub import load_hub_split
from entropy_lens.prompts.sources import check_hub_columns, read_local
from entropy_lens.prompts.tasks import check_stories

if TYPE_CHECKING:
    from entropy_lens.model.generation import GenerationSettings
    from entropy_lens.model.lens_model import LensModel

logger = logging.getLogger(__name__)

OPENING = "opening"
HUB_ID = "roneneldan/TinyStories"
HUB_SPLIT = "validation"
CHARACTERS = (
    "girl", "boy", "dog", "cat", "bird", "bunny", "bear", "fish", "frog", "duck", "mouse", "owl",
    "puppy", "kitten", "lion", "elephant", "car", "boat", "tree", "flower", "robot", "dragon", "horse", "bee",
)  # fmt: skip
DEFAULT_OPENINGS = tuple(f"Once upon a time, there was a little {c}" for c in CHARACTERS)
MIN_STORY_WORDS = 30
MAX_ATTEMPTS_PER_STORY = 4
# Hub stories drawn per story wanted, so that enough are under max_words.
HUB_CANDIDATES_PER_STORY = 4
# A sentence ends at . ! or ? (optionally followed by a closing quote).
_SENTENCE_END = re.compile(r"[.!?][\"”']?")


def load_hub_stories(n: int, *, split: str = HUB_SPLIT) -> pd.DataFrame:
    """The first ``n`` stories of ``roneneldan/TinyStories`` (from the hub, or the datasets cache offline).

    Returns:
        DataFrame[story_id, text]; ``story_id`` is ``s{row:05d}`` of the split.
    """
    data = load_hub_split(HUB_ID, None, split)
    check_hub_columns(data.features, f"{HUB_ID} {split}", {"text": "text"})
    if len(data) < n:
        raise ValueError(f"{HUB_ID} {split} has {len(data)} stories, fewer than the {n} asked")
    texts = [str(t).strip() for t in data.select(range(n))["text"]]
    stories = pd.DataFrame({STORY_ID: [f"s{i:05d}" for i in range(n)], TEXT: texts})
    check_stories(stories, f"{HUB_ID} {split}")
    return stories


def load_stories(
    source: str,
    *,
    n: int,
    story_file: str | os.PathLike | None = None,
    path: str | os.PathLike | None = None,
    id_column: str = STORY_ID,
    text_column: str = TEXT,
) -> pd.DataFrame:
    """The story table of a configured ``datasets.tasks.source``.

    Args:
        source: ``synthetic`` (read ``story_file``, written by :func:`generate_stories`),
            ``hub`` (TinyStories; ``4 * n`` candidates so that enough are short) or
            ``local`` (the user's file at ``path``).
        n: Stories the tasks set will use.
        story_file: The generated story table, for ``synthetic``.
        path: The user's jsonl / parquet / csv file, for ``local``.
        id_column: Column of the local file with a unique story id.
        text_column: Column of the local file with the story text.

    Returns:
        DataFrame[story_id, text] whose ``attrs`` carry the provenance (``story_source``,
        ``synthetic``, and the generator's settings for synthetic stories).
    """
    if source == "synthetic":
        if story_file is None:
            raise ValueError("synthetic stories need the generated story file (rule generate_stories)")
        stories = read_stories(story_file)
    elif source == "hub":
        stories = load_hub_stories(HUB_CANDIDATES_PER_STORY * n)
    elif source == "local":
        if not path:
            raise ValueError("datasets.tasks.source is 'local' but datasets.tasks.path is not set; name the story file")
        stories = read_local(path, {STORY_ID: id_column, TEXT: text_column})
        check_stories(stories, source=f"{path} (column {id_column!r} is the story id)")
    else:
        raise ValueError(f"story source must be 'synthetic', 'hub' or 'local', got {source!r}")
    stories.attrs = {"story_source": source, "synthetic": source == "synthetic", **stories.attrs}
    return stories


def trim_to_sentence(text: str) -> str:
    """``text`` cut after its last complete sentence (unchanged if it has none)."""
    ends = list(_SENTENCE_END.finditer(text))
    return text[: ends[-1].end()].strip() if ends else text.strip()


def _normalized(text: str) -> str:
    return " ".join(text.lower().split())


def generate_stories(
    lm: LensModel,
    n: int,
    *,
    seed: int,
    max_new_tokens: int,
    temperature: float,
    openings: Sequence[str] = DEFAULT_OPENINGS,
    batch_size: int = 8,
    min_words: int = MIN_STORY_WORDS,
    max_attempts: int | None = None,
) -> tuple[pd.DataFrame, dict]:
    """Write ``n`` distinct TinyStories-like stories with ``lm`` from seeded openings.

    Candidate ``k`` continues an opening drawn with ``seed``; with ``temperature > 0``
    it is sampled with its own generator (seeded by ``(seed, k)``, so results do not
    depend on batching), with ``temperature == 0`` decoded greedily.  Each story is
    cut after its last complete sentence; stories shorter than ``min_words`` words and
    duplicates (case- and whitespace-insensitive) are dropped.

    Args:
        lm: The generating model.
        n: Stories wanted.
        seed: Seed of the openings and of sampling.
        max_new_tokens: Token budget per story.
        temperature: Sampling temperature; 0 for greedy decoding.
        openings: Story openings to continue.
        batch_size: Candidates per generation call.
        min_words: Shortest story kept, in words.
        max_attempts: Candidates tried before giving up (default ``4 * n``).

    Returns:
        ``(stories, provenance)``: DataFrame[story_id, text, opening] with ids
        ``syn{i:05d}``, and JSON-safe provenance (``synthetic=True``, model, settings).

    Raises:
        ValueError: when fewer than ``n`` distinct stories come out of ``max_attempts``.
    """
    if not isinstance(n, int) or n <= 0:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if not openings or not all(isinstance(o, str) and o.strip() for o in openings):
        raise ValueError(f"openings must be non-empty strings, got {openings!r}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature!r}")
    # Imported here: generation imports torch, which the jobs that only read stories (prepare_tasks) never need.
    from entropy_lens.model.generation import GenerationSettings

    settings = GenerationSettings(max_new_tokens, temperature > 0, temperature or 1.0, seed)
    attempts = max_attempts if max_attempts is not None else MAX_ATTEMPTS_PER_STORY * n
    rng = np.random.default_rng(seed)
    kept: dict[str, tuple[str, str]] = {}
    tried = 0
    while len(kept) < n and tried < attempts:
        size = min(batch_size, attempts - tried, n - len(kept))
        chosen = [openings[i] for i in rng.integers(len(openings), size=size)]
        texts = _continue(lm, chosen, settings, range(tried, tried + size))
        for opening, text in zip(chosen, texts, strict=True):
            if len(text.split()) >= min_words and len(kept) < n:
                kept.setdefault(_normalized(text), (text, opening))
        tried += size
    if len(kept) < n:
        raise ValueError(
            f"only {len(kept)} distinct stories of >= {min_words} words after {tried} attempts, {n} asked; "
            "raise temperature, max_new_tokens or max_attempts, or add openings"
        )
    logger.info("generated %d distinct stories in %d attempts with %s", n, tried, lm.name)
    stories = pd.DataFrame(
        [(f"syn{i:05d}", text, opening) for i, (text, opening) in enumerate(kept.values())],
        columns=[STORY_ID, TEXT, OPENING],
    )
    return stories, _provenance(lm, settings, n, tried, openings, min_words)


def _continue(lm: LensModel, openings: list[str], settings: GenerationSettings, candidates: range) -> list[str]:
    from entropy_lens.model.generation import generate, row_seed  # torch: see generate_stories

    tok = lm.tokenizer
    prompts = [tok(o)["input_ids"] for o in openings]
    seeds = [row_seed(settings.seed, k) for k in candidates]
    tokens = generate(lm, prompts, settings, on_step=lambda *a: None, row_seeds=seeds).cpu().numpy()
    texts = []
    for prompt, row in zip(prompts, tokens, strict=True):
        generated = [int(t) for t in row if t >= 0]
        texts.append(trim_to_sentence(tok.decode(prompt + generated, skip_special_tokens=True)))
    return texts


def _provenance(
    lm: LensModel, settings: GenerationSettings, n: int, tried: int, openings: Sequence[str], min_words: int
) -> dict:
    return {
        "synthetic": True,
        "story_source": "generated",
        "generator_model": lm.name,
        "generator_source": lm.source,
        "generator_sha256": lm.sha256,
        "max_new_tokens": settings.max_new_tokens,
        "do_sample": settings.do_sample,
        "temperature": settings.temperature if settings.do_sample else 0.0,
        "seed": settings.seed,
        "n_stories": n,
        "n_attempts": tried,
        "min_words": min_words,
        "openings": json.dumps(list(openings)),
    }


def write_stories(stories: pd.DataFrame, path: str | os.PathLike, provenance: dict) -> Path:
    """Check a story table (``story_id``, ``text``) and write it atomically with its provenance."""
    check_stories(stories, str(path))
    return write_parquet(stories, path, dict(provenance, table_kind="stories"))


def read_stories(path: str | os.PathLike) -> pd.DataFrame:
    """Read a story table written by :func:`write_stories` (provenance in ``df.attrs``)."""
    stories = read_parquet(path)
    check_stories(stories, str(path))
    return stories
