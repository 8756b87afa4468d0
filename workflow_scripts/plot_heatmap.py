"""Rule plot_heatmap: token x layer entropy of the first prompt, top-1 token in each cell."""

import logging

from entropy_lens import storage
from entropy_lens.models import load_tokenizer
from entropy_lens.plots import plot_token_heatmap

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
store_path, model_dir, png = snakemake.input.store, snakemake.input.model, snakemake.output[0]
model, dataset = snakemake.wildcards.model, snakemake.wildcards.dataset

row = storage.open_profiles(store_path).isel(prompt=0).load()
tokenizer = load_tokenizer(model_dir)
generated = [tokenizer.decode([int(t)]) if t >= 0 else "" for t in row["token_id"].values]
plot_token_heatmap(
    row["entropy"].values,
    row["top1_id"].values,
    lambda token_id: tokenizer.decode([int(token_id)]),
    png,
    token_labels=generated,
    title=f"{model} on {dataset} prompt {row['prompt'].item()}",
)
