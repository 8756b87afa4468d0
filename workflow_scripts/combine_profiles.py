"""Rule combine_profiles: one store per dataset with a model dim (NaN-padded layers)."""

import logging

import pandas as pd

from entropy_lens import storage
from entropy_lens.combine import attach_mmlu_scores, combine_models

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
store_paths, score_paths = list(snakemake.input.stores), list(snakemake.input.scores)
models, labels, store = snakemake.params.models, snakemake.params.labels, snakemake.params.storage
out_path = snakemake.output[0]

stores = {m: storage.open_profiles(p).load() for m, p in zip(models, store_paths, strict=True)}
n_params = {m: labels[m]["n_params"] or int(stores[m].attrs["n_params"]) for m in models}
combined = combine_models(stores, families={m: labels[m]["family"] for m in models}, n_params=n_params)
if score_paths:
    combined = attach_mmlu_scores(combined, pd.concat([pd.read_parquet(p) for p in score_paths]))
storage.write_profiles(
    combined, out_path, combined=True, chunk_prompts=store["chunk_prompts"], shard_prompts=store["shard_prompts"]
)
