"""Rule layer_skip_select: mean Delta H on calibration prompts -> skip conditions and guidance."""

import json
import logging

import torch

from entropy_lens import extract_profiles, load_model
from entropy_lens.datasets import read_table
from entropy_lens.devices import claim_device
from entropy_lens.skipping import mean_delta_h, protected_layers, skip_conditions

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
model_dir, calibration_path = snakemake.input.model, snakemake.input.calibration
skip, lens, compute, chat = (snakemake.params[k] for k in ("skip", "lens", "compute", "chat_template"))
out = snakemake.output
torch.set_num_threads(snakemake.threads)

table = read_table(calibration_path, "mmlu")
with claim_device(compute["device"]) as device:
    lm = load_model(model_dir, device=device, dtype=compute["dtype"])
    ds = extract_profiles(
        lm,
        table["prompt"].tolist(),
        prompt_ids=table["prompt_id"].tolist(),
        max_new_tokens=skip["calibration_tokens"],
        top_p=lens["top_p"],
        alphas=[1.0],
        budget_bytes=lens["budget_mb"] * 2**20,
        chat_template=chat,
    )
delta_h = mean_delta_h(ds)
conditions = skip_conditions(delta_h, skip["ks"], skip["random_sets"], skip["seed"])
with open(out.conditions, "w") as handle:
    json.dump({"model": lm.name, "n_layers": lm.n_layers, "conditions": conditions}, handle, indent=2)
with open(out.protected, "w") as handle:
    json.dump(protected_layers(delta_h), handle, indent=2)
