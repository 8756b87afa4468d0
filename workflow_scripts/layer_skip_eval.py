"""Rule layer_skip_eval: MMLU accuracy under every skip condition, and profiles under skip."""

import json
import logging

import pandas as pd
import torch

from entropy_lens import extract_profiles, load_model
from entropy_lens.datasets import read_table
from entropy_lens.devices import claim_device
from entropy_lens.scoring import letter_logprobs
from entropy_lens.skipping import condition_kind, run_skip_conditions, skip_blocks

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
model_dir, eval_path, conditions_path = snakemake.input.model, snakemake.input.evaluation, snakemake.input.conditions
skip, lens, compute = snakemake.params.skip, snakemake.params.lens, snakemake.params.compute
chat, family, batch_size = snakemake.params.chat_template, snakemake.params.family, snakemake.params.batch_size
model, out = snakemake.wildcards.model, snakemake.output
torch.set_num_threads(snakemake.threads)

table = read_table(eval_path, "mmlu")
with open(conditions_path) as handle:
    conditions = json.load(handle)["conditions"]
prompts = table["prompt"].tolist()
with claim_device(compute["device"]) as device:
    lm = load_model(model_dir, device=device, dtype=compute["dtype"])
    accuracy = run_skip_conditions(
        lm,
        prompts,
        table["answer"].tolist(),
        conditions,
        lambda m, p: letter_logprobs(m, p, batch_size=batch_size, chat_template=chat),
        n_boot=skip["n_boot"],
        seed=skip["seed"],
    )
    profiled = {c: layers for c, layers in conditions.items() if not c.startswith("random") or c.endswith("_r0")}
    rows = []
    for name, layers in profiled.items():
        with skip_blocks(lm, layers):
            ds = extract_profiles(
                lm,
                prompts[: skip["profile_prompts"]],
                max_new_tokens=skip["calibration_tokens"],
                top_p=lens["top_p"],
                alphas=[1.0],
                chat_template=chat,
            )
        mean = ds["entropy"].mean(("prompt", "token"), skipna=True)
        rows += [
            {"condition": name, "layer": int(lay), "depth": float(d), "entropy": float(h)}
            for lay, d, h in zip(ds["layer"].values, ds["depth"].values, mean.values, strict=True)
        ]
accuracy = accuracy.assign(model=model, family=family, kind=[condition_kind(c) for c in accuracy["condition"]])
accuracy.to_csv(out.accuracy, index=False)
pd.DataFrame(rows).to_csv(out.profiles, index=False)
