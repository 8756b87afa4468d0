"""Rule extract_profiles: profile one model on one prompt set into its own Zarr store."""

import logging

import torch
from tqdm import tqdm

from entropy_lens import extract_profiles, load_model, storage
from entropy_lens.datasets import label_columns, read_table
from entropy_lens.devices import claim_device

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
model_dir, table_path = snakemake.input.model, snakemake.input.table
gen, lens, compute, store = (snakemake.params[k] for k in ("generation", "lens", "compute", "storage"))
dataset, out_path = snakemake.wildcards.dataset, snakemake.output[0]
torch.set_num_threads(snakemake.threads)

table = read_table(table_path, dataset)
seeds = table["seed"].tolist() if "seed" in table else None
with claim_device(compute["device"]) as device, open(snakemake.log[0], "a") as log:
    lm = load_model(model_dir, device=device, dtype=compute["dtype"])
    with tqdm(total=len(table), desc=f"{lm.name} {dataset}", unit="prompt", file=log, mininterval=5) as bar:
        ds = extract_profiles(
            lm,
            table["prompt"].tolist(),
            prompt_ids=table["prompt_id"].tolist(),
            max_new_tokens=gen["max_new_tokens"],
            top_p=lens["top_p"],
            alphas=lens["alphas"],
            budget_bytes=lens["budget_mb"] * 2**20,
            batch_size=gen["batch_size"],
            do_sample=gen["do_sample"],
            temperature=gen["temperature"],
            seed=gen["seed"],
            sample_seeds=seeds,
            chat_template=gen["chat_template"],
            progress=bar.update,
        )
labels = {c: ("prompt", table[c].to_numpy()) for c in label_columns(dataset) if c in table}
ds = ds.assign_coords(labels).assign_attrs(dataset=dataset)
storage.write_profiles(ds, out_path, chunk_prompts=store["chunk_prompts"], shard_prompts=store["shard_prompts"])
