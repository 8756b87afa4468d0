"""Prompt lengths a plan sizes its jobs by: from a prompt table and the model's tokenizer where both exist,
else from the table's characters, else (no table yet) from the dataset's config section.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from entropy_lens.prompts.counts import prompt_count
from entropy_lens.prompts.datasets import FORMAT_TEMPLATES, PROMPT_TEXT, TASK_QUESTIONS, TASK_TEMPLATES, load_topics
from entropy_lens.workflow.plan.settings import PlanSettings, config_value
from entropy_lens.workflow.plan.shapes import ModelShape

logger = logging.getLogger(__name__)

MMLU_QUESTIONS = 14_042
MMLU_QUESTION_CHARS = (466.1, 4868)  # mean, max
# Quantiles of the same: a sample of n questions is planned with the (1 - 1/n) quantile as its longest.
MMLU_QUESTION_QUANTILES = ((0.9, 1135), (0.99, 2178), (0.999, 2950), (1.0, 4868))
MMLU_HEADER_CHARS = {"base": (85.4, 103), "instruct": (135.4, 153), "explain": (155.4, 173)}
TASK_PROMPTS_PER_STORY = len(TASK_QUESTIONS) * 2 * len(TASK_TEMPLATES) * 2  # phrasings, templates, scrambled
# Estimates for story prompts before the table exists: English prose runs ~5.5 characters per word
# (letters, space, punctuation), and stories kept under max_words average ~3/4 of it.
STORY_CHARS_PER_WORD = 5.5
STORY_WORDS_FRACTION = 0.75


@dataclass(frozen=True)
class PromptStats:
    """Prompt lengths one model sees for one prompt set (template and BOS included).

    Attributes:
        prompts: Number of prompts.
        mean_tokens: Mean prompt length, tokens.
        max_tokens: Longest prompt, tokens.
        source: ``"tokenizer"`` (counted), ``"characters"`` (table text / chars_per_token)
            or ``"estimate"`` (no table yet).
        lengths: Per-prompt lengths in table order, when known (for shards).
    """

    prompts: int
    mean_tokens: float
    max_tokens: int
    source: str
    lengths: tuple[int, ...] = ()

    @classmethod
    def from_lengths(cls, lengths: Sequence[int], source: str) -> PromptStats:
        if not len(lengths):
            raise ValueError("a prompt set needs at least one prompt, got an empty table")
        return cls(len(lengths), sum(lengths) / len(lengths), max(lengths), source, tuple(int(n) for n in lengths))

    def shards(self, size: int) -> list[PromptStats]:
        """Consecutive shards of ``size`` prompts (the whole set when ``size`` is 0 or larger)."""
        if size <= 0 or size >= self.prompts:
            return [self]
        starts = range(0, self.prompts, size)
        if self.lengths:
            return [PromptStats.from_lengths(self.lengths[s : s + size], self.source) for s in starts]
        return [dataclasses.replace(self, prompts=min(size, self.prompts - s)) for s in starts]


# Prompt lengths -------------------------------------------------------------------------------------------------

TokenCounter = Callable[[Sequence[str]], list[int]]


def token_counter(folder: str | os.PathLike, *, chat_template: bool) -> TokenCounter | None:
    """Count prompt tokens as extraction encodes them, with the tokenizer in ``folder``.

    Mirrors :func:`entropy_lens.lens.encoding.encode_prompts`: chat-rendered text is encoded
    without added special tokens, raw text with them, and ``""`` is the BOS token.

    Returns:
        A counter, or ``None`` when ``folder`` holds no loadable tokenizer.
    """
    if not any((Path(folder) / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json")):
        return None
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as err:
        logger.warning("no tokenizer loaded from %s (%s); estimating from characters", folder, err)
        return None
    chat = chat_template and bool(getattr(tok, "chat_template", None))

    def count(prompts: Sequence[str]) -> list[int]:
        texts = [_render(tok, p) if chat else p for p in prompts]
        nonempty = [t for t in texts if t]
        ids = iter(tok(nonempty, add_special_tokens=not chat)["input_ids"] if nonempty else [])
        return [len(next(ids)) if t else 1 for t in texts]

    return count


def _render(tok, prompt: str) -> str:
    return tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)


def stats_from_table(
    prompts: Sequence[str], settings: PlanSettings, *, chat: bool, counter: TokenCounter | None = None
) -> PromptStats:
    """Prompt lengths of a prompt table's ``prompt`` column: counted, or from characters."""
    if counter is not None:
        return PromptStats.from_lengths(counter(list(prompts)), "tokenizer")
    extra = 1 + (settings.chat_template_tokens if chat else 0)  # BOS and template
    lengths = [math.ceil(len(p) / settings.chars_per_token) + extra if p else 1 for p in prompts]
    return PromptStats.from_lengths(lengths, "characters")


def estimated_stats(dataset: str, spec: Mapping, settings: PlanSettings, *, chat: bool) -> PromptStats:
    """Prompt lengths of a dataset before its table exists, from its config section.

    Args:
        dataset: ``tasks``, ``formats``, ``mmlu`` or ``blank``.
        spec: The dataset's config section (defaults filled).
        settings: Characters per token and chat-template tokens.
        chat: Prompts are rendered with a chat template.

    Raises:
        ValueError: for an unknown dataset.
    """
    if dataset == "blank":
        return PromptStats(config_value(spec, "n_samples"), 1.0, 1, "estimate")  # the BOS token alone
    estimators = {"tasks": _task_chars, "formats": _format_chars, "mmlu": _mmlu_chars}
    if dataset not in estimators:
        raise ValueError(f"unknown dataset {dataset!r}; use one of {sorted([*estimators, 'blank'])}")
    n, mean_chars, max_chars = estimators[dataset](spec)
    extra = 1 + (settings.chat_template_tokens if chat else 0)
    return PromptStats(
        n,
        mean_chars / settings.chars_per_token + extra,
        math.ceil(max_chars / settings.chars_per_token) + extra,
        "estimate",
    )


def _task_chars(spec: Mapping) -> tuple[int, float, float]:
    questions = [len(q) + 2 for pair in TASK_QUESTIONS.values() for q in pair]  # "\n\n" between story and question
    words = config_value(spec, "max_words")
    mean = STORY_WORDS_FRACTION * words * STORY_CHARS_PER_WORD + sum(questions) / len(questions)
    return config_value(spec, "n_stories") * TASK_PROMPTS_PER_STORY, mean, words * STORY_CHARS_PER_WORD + max(questions)


def _format_chars(spec: Mapping) -> tuple[int, float, float]:
    topics = load_topics()
    n_topics = config_value(spec, "n_topics") or len(topics)
    chars = [len(t.format(topic=topic)) for t in FORMAT_TEMPLATES.values() for topic in topics]
    return len(FORMAT_TEMPLATES) * min(n_topics, len(topics)), sum(chars) / len(chars), max(chars)


def _mmlu_chars(spec: Mapping) -> tuple[int, float, float]:
    styles = list(config_value(spec, "styles"))
    unknown = [s for s in styles if s not in MMLU_HEADER_CHARS]
    if unknown:
        raise ValueError(f"unknown MMLU styles {unknown}; use some of {sorted(MMLU_HEADER_CHARS)}")
    shots = spec.get("n_shot", 0)
    n = min(config_value(spec, "n_questions") or MMLU_QUESTIONS, MMLU_QUESTIONS)
    q_max = next(chars for q, chars in MMLU_QUESTION_QUANTILES if q >= 1 - 1 / n)
    mean = sum(MMLU_HEADER_CHARS[s][0] for s in styles) / len(styles) + (1 + shots) * MMLU_QUESTION_CHARS[0] + shots * 4
    longest = max(MMLU_HEADER_CHARS[s][1] for s in styles) + (1 + shots) * q_max + shots * 4
    return n * len(styles), mean, longest


# The config adapter ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelContext:
    """A configured model as the plan sees it: its name, shape, chat template and materialized folder (if any)."""

    name: str
    shape: ModelShape
    chat_template: bool
    folder: Path | None


class PromptLengths:
    """Prompt lengths per (model, table) of a config, from tables and tokenizers when present; cached."""

    def __init__(self, config: Mapping, settings: PlanSettings, tables: Mapping[str, str | os.PathLike]) -> None:
        self.config, self.settings = config, settings
        self.tables = {k: Path(v) for k, v in tables.items() if Path(v).is_file()}
        self._texts: dict[str, list[str]] = {}
        self._counters: dict[tuple[str, bool], TokenCounter | None] = {}

    def stats(self, model: ModelContext, table: str, *, chat: bool, spec: Mapping | None = None) -> PromptStats:
        """Lengths of ``table`` as ``model`` sees it; estimated from ``spec`` (default: the
        config section of the dataset named ``table``) while the table does not exist.

        The number of prompts always comes from the config (:func:`prompt_count`, as
        ``rules/common.smk`` counts shards); a table holding another number was built under
        another config (its rule rebuilds it), so its lengths are not used either.
        """
        dataset = "mmlu" if table.startswith(("layer_skip", "lens_")) else table
        spec = spec if spec is not None else config_value(self.config, "datasets", dataset)
        expected = prompt_count(dataset, spec)
        texts = self._texts_of(table, expected)
        if texts is None:
            return dataclasses.replace(estimated_stats(dataset, spec, self.settings, chat=chat), prompts=expected)
        return self.of_texts(model, texts, chat=chat)

    def _texts_of(self, table: str, expected: int) -> list[str] | None:
        """The prompt texts of ``table``, or None when it does not exist or holds another count."""
        if table not in self.tables:
            return None
        if table not in self._texts:
            self._texts[table] = pd.read_parquet(self.tables[table], columns=[PROMPT_TEXT])[PROMPT_TEXT].tolist()
            if len(self._texts[table]) != expected:
                logger.warning(
                    "%s holds %d prompts but the config builds %d: it was built under another config and its "
                    "rule rebuilds it; prompt lengths are estimated from the config",
                    self.tables[table],
                    len(self._texts[table]),
                    expected,
                )
        texts = self._texts[table]
        return texts if len(texts) == expected else None

    def of_texts(self, model: ModelContext, texts: Sequence[str], *, chat: bool) -> PromptStats:
        """Lengths of given prompt texts as ``model`` sees them."""
        return stats_from_table(texts, self.settings, chat=chat, counter=self._counter(model, chat))

    def _counter(self, model: ModelContext, chat: bool) -> TokenCounter | None:
        if model.folder is None:
            return None
        if (model.name, chat) not in self._counters:
            self._counters[(model.name, chat)] = token_counter(model.folder, chat_template=chat)
        return self._counters[(model.name, chat)]
