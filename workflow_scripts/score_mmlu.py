"""Rule score_mmlu: each question's answer by letter log-likelihood and by parsing the completion."""

import logging

import pandas as pd
import torch

from entropy_lens import load_model, storage
from entropy_lens.datasets import read_table
from entropy_lens.devices import claim_device
from entropy_lens.scoring import correct_flags, letter_logprobs, parse_letter, predicted_letters

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
model_dir, table_path, store_path = snakemake.input.model, snakemake.input.table, snakemake.input.profiles
scoring, compute = snakemake.params.scoring, snakemake.params.compute
model, out_path = snakemake.wildcards.model, snakemake.output[0]
torch.set_num_threads(snakemake.threads)

table = read_table(table_path, "mmlu")
profiles = storage.open_profiles(store_path)
with claim_device(compute["device"]) as device:
    lm = load_model(model_dir, device=device, dtype=compute["dtype"])
    logprobs = letter_logprobs(
        lm, table["prompt"].tolist(), batch_size=scoring["batch_size"], chat_template=scoring["chat_template"]
    )
token_ids = profiles["token_id"].sel(prompt=table["prompt_id"].tolist()).values
completions = [lm.tokenizer.decode([int(t) for t in row if t >= 0], skip_special_tokens=True) for row in token_ids]
ll_letters, parsed_letters = predicted_letters(logprobs), [parse_letter(c) for c in completions]
scores = pd.DataFrame(
    {
        "prompt_id": table["prompt_id"],
        "model": model,
        "style": table["style"],
        "subject": table["subject"],
        "answer": table["answer"],
        "ll_letter": ll_letters,
        "parsed_letter": parsed_letters,
        "correct_ll": correct_flags(table["answer"], ll_letters),
        "correct_parsed": correct_flags(table["answer"], parsed_letters),
        "completion": completions,
        **{f"logprob_{letter}": logprobs[:, i] for i, letter in enumerate("ABCD")},
    }
)
scores.to_parquet(out_path, index=False)
