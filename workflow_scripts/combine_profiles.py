"""Rule combine_profiles: one store per dataset with a model dim (NaN-padded layers), MMLU scores attached."""

import pandas as pd

from entropy_lens.jobs import setup_logging
from entropy_lens.store import storage
from entropy_lens.store.combine import combine_dataset

setup_logging(snakemake)
models, store = snakemake.params.models, snakemake.params.storage
score_paths = list(snakemake.input.scores)

stores = {m: storage.open_profiles(p).load() for m, p in zip(models, snakemake.input.stores, strict=True)}
scores = pd.concat([pd.read_parquet(p) for p in score_paths]) if score_paths else None
combined = combine_dataset(stores, snakemake.params.labels, scores)
storage.write_profiles(
    combined,
    snakemake.output[0],
    combined=True,
    chunk_prompts=store["chunk_prompts"],
    shard_prompts=store["shard_prompts"],
)
