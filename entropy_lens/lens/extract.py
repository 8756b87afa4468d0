"""Profile a prompt table: the extraction job of one model on one dataset, or on one shard of it.

Reads the table's prompts, ids and (blank set) per-sample seeds, shows progress, and
labels the resulting store with the table's label columns and the dataset name.

Shards.  A dataset split into jobs of ``prompts_per_job`` prompts is split along the
order the whole job would batch in (prompts sorted by token length, ties in table
order): with ``prompts_per_job`` a multiple of the batch size, every shard runs exactly
the batches the unsharded job would, so the gathered store
(:func:`entropy_lens.store.combine.gather_shards`) equals the unsharded one value for value.

Image tables (kind ``images``) are profiled by an image classifier
(:func:`entropy_lens.lens.vision.extract_image_profiles`); their shards are slices of the
table order, every image being one forward pass of the same size.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr
from tqdm import tqdm

from entropy_lens.lens.choices import choice_logprobs, readout_of
from entropy_lens.lens.decoding import LensSettings
from entropy_lens.lens.encoding import PromptSettings, encode_prompts
from entropy_lens.lens.text import extract_profiles
from entropy_lens.lens.translators import Translators
from entropy_lens.lens.vision import extract_image_profiles
from entropy_lens.model.batching import shard_slice
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.model.lens_model import LensModel
from entropy_lens.prompts.datasets import IMAGE, PROMPT_ID, PROMPT_TEXT, SEED, label_columns, source_column
from entropy_lens.store import schema

logger = logging.getLogger(__name__)

PROGRESS_SECONDS = 5.0


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of a dataset split into jobs of ``size`` prompts."""

    index: int
    size: int

    def __post_init__(self) -> None:
        if self.index < 0 or self.size < 1:
            raise ValueError(f"a shard needs index >= 0 and size >= 1, got index {self.index}, size {self.size}")

    @classmethod
    def of(cls, spec: tuple[int, int] | list[int] | None) -> Shard | None:
        """A shard from ``(index, size)`` as a rule passes it, or ``None`` for a whole dataset."""
        return None if spec is None else cls(int(spec[0]), int(spec[1]))


def shard_rows(
    lm: LensModel, table: pd.DataFrame, shard: Shard, *, chat_template: bool, batch_size: int = 1, kind: str = ""
) -> np.ndarray:
    """Table positions of ``shard``: its slice of the order the whole job batches in, in table order.

    ``kind`` names the table's kind: a text table's prompts are batched by length with at most half of a
    batch from one source (:func:`entropy_lens.model.batching.batch_order`), so the order needs the
    ``batch_size`` and each prompt's source.

    Raises:
        ValueError: when the shard lies past the end of the table (the config counted more
            prompts than the table holds).
    """
    sources = None
    if lm.readout is not None:  # an image classifier: every image costs the same
        lengths = [1] * len(table)
    else:
        encoded, _ = encode_prompts(lm, table[PROMPT_TEXT].tolist(), chat_template=chat_template)
        lengths = [len(ids) for ids in encoded]
        sources = table_sources(table, kind)
    rows = shard_slice(lengths, shard.index, shard.size, sources, batch_size)
    if rows.size == 0:
        raise ValueError(
            f"shard {shard.index} of {shard.size} prompts starts past the table's {len(table)} prompts; "
            "the config counts more prompts than the table holds"
        )
    return rows


def table_sources(table: pd.DataFrame, kind: str) -> list[str] | None:
    """The source of each prompt of a ``kind`` table (:func:`entropy_lens.prompts.datasets.source_column`), or
    ``None`` (every prompt its own source) for a kind without one or a table without the column."""
    column = source_column(kind) if kind else ""
    return table[column].astype(str).tolist() if column in table else None


def extract_table(
    lm: LensModel,
    table: pd.DataFrame,
    dataset: str,
    *,
    generation: GenerationSettings,
    lens: LensSettings,
    prompting: PromptSettings,
    shard: Shard | None = None,
    choices: Sequence[str] = (),
    translators: Translators | None = None,
) -> xr.Dataset:
    """Profiles of every prompt of a validated prompt table (or of one shard), labelled.

    Args:
        lm: The model.
        table: A prompt table of kind ``dataset`` (see :mod:`entropy_lens.prompts.datasets`).
        dataset: ``tasks``, ``formats``, ``mmlu`` or ``blank``.
        generation: Token choice and count.
        lens: What is measured.
        prompting: Prompts per forward pass and the chat template (images: the batch size alone).
        shard: Profile only this shard (see the module docstring); ``None``: all prompts.
        choices: Answer choices (e.g. ``A``..``D``) whose log-probabilities are read from the
            first generation step into ``choice_logprob`` (see :mod:`entropy_lens.lens.choices`);
            prompts that step cannot serve are scored by a forward pass of their own.
        translators: Read the profiles through a fitted lens (text prompts; see
            :func:`entropy_lens.lens.text.extract_profiles`); default the logit lens.

    Returns:
        A schema-valid per-model dataset with the label coordinates on ``prompt`` and
        ``attrs["dataset"]`` (and ``shard``, ``prompts_per_job`` for a shard).
    """
    if translators is not None and IMAGE in table:
        raise ValueError(
            f"a fitted lens ({translators.kind}) reads text profiles; the {dataset!r} images use the logit lens"
        )
    if shard is not None:
        table = table.iloc[
            shard_rows(
                lm, table, shard, chat_template=prompting.chat_template, batch_size=prompting.batch_size, kind=dataset
            )
        ]
    with tqdm(
        total=len(table), desc=f"{lm.name} {dataset}", unit="prompt", file=sys.stderr, mininterval=PROGRESS_SECONDS
    ) as bar:
        if IMAGE in table:
            ds = extract_image_profiles(
                lm,
                table[IMAGE].tolist(),
                prompt_ids=table[PROMPT_ID].tolist(),
                references=table[PROMPT_TEXT].tolist(),
                lens=lens,
                batch_size=prompting.batch_size,
                progress=bar.update,
            )
        else:
            ds = _text_profiles(
                lm,
                table,
                generation=generation,
                lens=lens,
                prompting=prompting,
                choices=choices,
                progress=bar.update,
                translators=translators,
                sources=table_sources(table, dataset),
            )
    labels = {c: (schema.PROMPT, table[c].to_numpy()) for c in label_columns(dataset) if c in table and c != IMAGE}
    ds = ds.assign_coords(labels).assign_attrs(dataset=dataset)
    return ds if shard is None else ds.assign_attrs(shard=shard.index, prompts_per_job=shard.size)


def _text_profiles(
    lm: LensModel,
    table: pd.DataFrame,
    *,
    generation: GenerationSettings,
    lens: LensSettings,
    prompting: PromptSettings,
    choices: Sequence[str],
    progress: Callable[[int], None],
    translators: Translators | None,
    sources: list[str] | None,
) -> xr.Dataset:
    """Profiles of a text prompt table, with the choices' log-probabilities where asked; ``sources`` of its
    prompts as :func:`table_sources` gives them."""
    prompts = table[PROMPT_TEXT].tolist()
    chat_template = prompting.chat_template
    readout = readout_of(lm, prompts, choices, chat_template=chat_template) if choices else None
    ds = extract_profiles(
        lm,
        prompts,
        prompt_ids=table[PROMPT_ID].tolist(),
        generation=generation,
        lens=lens,
        sample_seeds=table[SEED].tolist() if SEED in table else None,
        prompting=prompting,
        progress=progress,
        readout=readout,
        translators=translators,
        sources=sources,
    )
    if readout is None:
        return ds
    return _score_unread(
        lm, ds, prompts, ~readout.readable, batch_size=prompting.batch_size, chat_template=chat_template
    )


def _score_unread(
    lm: LensModel, ds: xr.Dataset, prompts: list[str], unread: np.ndarray, *, batch_size: int, chat_template: bool
) -> xr.Dataset:
    """Fill ``choice_logprob`` of the prompts the first generation step could not read."""
    if not unread.any():
        return ds
    logger.info("%d of %d prompts need a forward pass of their own for their choices", unread.sum(), len(unread))
    labels = [str(c) for c in ds[schema.CHOICE].values]
    rows = np.flatnonzero(unread)
    values = ds[schema.CHOICE_LOGPROB].values.copy()
    values[rows] = choice_logprobs(
        lm, [prompts[r] for r in rows], labels, batch_size=batch_size, chat_template=chat_template
    )
    return ds.assign({schema.CHOICE_LOGPROB: ds[schema.CHOICE_LOGPROB].copy(data=values)})
