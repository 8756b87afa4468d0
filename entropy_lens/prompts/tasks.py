"""The ``tasks`` prompt set: story tasks with word-scrambled controls.

Every prompt is built from the original story.  A scrambled prompt scrambles that
story with its own seed, so an intact prompt never holds scrambled text, and the
scrambled copy keeps exactly the same multiset of words.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from entropy_lens.prompts.datasets import (
    PHRASING,
    PROMPT_ID,
    PROMPT_TEXT,
    SCRAMBLED,
    STORY_ID,
    TASK,
    TASK_QUESTIONS,
    TASK_TEMPLATES,
    TEMPLATE,
    TEXT,
    derive_seed,
)

logger = logging.getLogger(__name__)


def scramble_words(text: str, seed: int) -> str:
    """The words of ``text`` (split on whitespace) in a seeded random order, space-joined.

    The result holds exactly the same multiset of words and, when there are at least
    two distinct words, is never in the original order.
    """
    words = text.split()
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(words))
    if len(set(words)) > 1:
        while [words[i] for i in order] == words:
            order = rng.permutation(len(words))
    return " ".join(words[i] for i in order)


def check_stories(stories: pd.DataFrame, source: str = "stories") -> None:
    """Check a story source table: unique non-empty str ``story_id``, non-empty str ``text``."""
    for column in (STORY_ID, TEXT):
        if column not in stories.columns:
            raise ValueError(f"{source} lacks column {column!r}; it has {list(stories.columns)}")
        bad = ~stories[column].map(lambda v: isinstance(v, str) and v.strip() != "").to_numpy(bool)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{source}: row {row} has an empty or non-text {column!r}: {stories[column].iloc[row]!r}")
    dup = stories[STORY_ID].duplicated().to_numpy(bool)
    if dup.any():
        row = int(np.flatnonzero(dup)[0])
        raise ValueError(
            f"{source}: row {row} repeats story_id {stories[STORY_ID].iloc[row]!r}; give every story its own id"
        )


def select_stories(stories: pd.DataFrame, *, max_words: int, n_stories: int | None = None) -> pd.DataFrame:
    """Stories of at most ``max_words`` words (first ``n_stories`` of them, if given).

    Raises:
        ValueError: when fewer than ``n_stories`` stories are short enough.
    """
    if not isinstance(max_words, int) or max_words <= 0:
        raise ValueError(f"max_words must be a positive integer, got {max_words!r}")
    check_stories(stories)
    n_words = stories[TEXT].map(lambda t: len(t.split()))
    kept = stories[n_words <= max_words]
    if len(kept) < len(stories):
        logger.info("skipped %d of %d stories above %d words", len(stories) - len(kept), len(stories), max_words)
    if n_stories is not None:
        if len(kept) < n_stories:
            raise ValueError(
                f"asked for {n_stories} stories but only {len(kept)} of {len(stories)} have <= {max_words} words; "
                "provide more stories or raise max_words"
            )
        kept = kept.iloc[:n_stories]
    return kept.reset_index(drop=True)


def build_tasks(stories: pd.DataFrame, *, seed: int, max_words: int, n_stories: int | None = None) -> pd.DataFrame:
    """The ``tasks`` table: 3 tasks x 2 phrasings x 2 templates x {intact, scrambled} per story.

    Each prompt is built from the original story; a scrambled prompt scrambles it with
    its own seed ``derive_seed(seed, story_id, task, phrasing, template)``, so no
    intact prompt ever holds scrambled text.

    Args:
        stories: Source table with columns ``story_id``, ``text``.
        seed: Base seed of the scrambles.
        max_words: Stories with more words are skipped (and counted in the log).
        n_stories: Keep the first ``n_stories`` short-enough stories; error if fewer.

    Returns:
        A ``tasks`` table of ``24 * n`` rows.
    """
    kept = select_stories(stories, max_words=max_words, n_stories=n_stories)
    rows = [
        _task_row(story_id, text, task, phrasing, template, scrambled, seed)
        for story_id, text in zip(kept[STORY_ID], kept[TEXT], strict=True)
        for task in TASK_QUESTIONS
        for phrasing in (1, 2)
        for template in TASK_TEMPLATES
        for scrambled in (False, True)
    ]
    return pd.DataFrame(rows)


def _task_row(story_id: str, text: str, task: str, phrasing: int, template: str, scrambled: bool, seed: int) -> dict:
    story = scramble_words(text, derive_seed(seed, story_id, task, phrasing, template)) if scrambled else text
    question = TASK_QUESTIONS[task][phrasing - 1]
    return {
        PROMPT_ID: f"tasks-{story_id}-{task}-p{phrasing}-{template}-{'scr' if scrambled else 'int'}",
        PROMPT_TEXT: TASK_TEMPLATES[template].format(story=story, question=question),
        TASK: task,
        PHRASING: phrasing,
        TEMPLATE: template,
        SCRAMBLED: scrambled,
        STORY_ID: story_id,
    }
