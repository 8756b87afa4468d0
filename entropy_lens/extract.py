"""Profile a prompt table: the extraction job of one model on one dataset.

Reads the table's prompts, ids and (blank set) per-sample seeds, shows progress, and
labels the resulting store with the table's label columns and the dataset name.
"""

from __future__ import annotations

import sys

import pandas as pd
import xarray as xr
from tqdm import tqdm

from entropy_lens import schema
from entropy_lens.generation import GenerationSettings
from entropy_lens.lens import LensSettings, extract_profiles
from entropy_lens.models import LensModel
from entropy_lens.prompts.datasets import PROMPT_ID, PROMPT_TEXT, SEED, label_columns

PROGRESS_SECONDS = 5.0


def extract_table(
    lm: LensModel,
    table: pd.DataFrame,
    dataset: str,
    *,
    generation: GenerationSettings,
    lens: LensSettings,
    batch_size: int,
    chat_template: bool,
) -> xr.Dataset:
    """Profiles of every prompt of a validated prompt table, labelled by its label columns.

    Args:
        lm: The model.
        table: A prompt table of kind ``dataset`` (see :mod:`entropy_lens.prompts.datasets`).
        dataset: ``tasks``, ``formats``, ``mmlu`` or ``blank``.
        generation: Token choice and count.
        lens: What is measured.
        batch_size: Prompts per forward pass.
        chat_template: Render prompts with the model's chat template.

    Returns:
        A schema-valid per-model dataset with the label coordinates on ``prompt`` and
        ``attrs["dataset"]``.
    """
    seeds = table[SEED].tolist() if SEED in table else None
    with tqdm(
        total=len(table), desc=f"{lm.name} {dataset}", unit="prompt", file=sys.stderr, mininterval=PROGRESS_SECONDS
    ) as bar:
        ds = extract_profiles(
            lm,
            table[PROMPT_TEXT].tolist(),
            prompt_ids=table[PROMPT_ID].tolist(),
            max_new_tokens=generation.max_new_tokens,
            do_sample=generation.do_sample,
            temperature=generation.temperature,
            seed=generation.seed,
            sample_seeds=seeds,
            top_p=lens.top_p,
            alphas=lens.alphas,
            budget_bytes=lens.budget_bytes,
            batch_size=batch_size,
            chat_template=chat_template,
            progress=bar.update,
        )
    labels = {c: (schema.PROMPT, table[c].to_numpy()) for c in label_columns(dataset) if c in table}
    return ds.assign_coords(labels).assign_attrs(dataset=dataset)
