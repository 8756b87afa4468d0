"""Rule fit_lens: fit one model's translators of one kind, and measure them and the logit lens on held-out prompts."""

import logging

import pandas as pd

from entropy_lens.analysis.lens_fit import kl_by_block
from entropy_lens.core.tables import write_csv
from entropy_lens.lens.fitting import corpus_ids, fit_kind
from entropy_lens.lens.held_out import held_out_kls
from entropy_lens.prompts.datasets import read_table
from entropy_lens.workflow.jobs import job_model, setup_logging

setup_logging(snakemake)
lenses, out, batch = snakemake.params.lenses, snakemake.output, snakemake.params.batch_size
model, kind = snakemake.wildcards.model, snakemake.wildcards.kind

fit_table = read_table(snakemake.input.fit, "mmlu")
held_out = read_table(snakemake.input.held_out, "mmlu")
provenance = {"corpus": "mmlu questions outside every analysed set (base style)", "corpus_seed": lenses["seed"]}
common = {"batch_size": batch, "seed": lenses["seed"], "provenance": provenance}
with job_model(snakemake) as lm:
    fit_ids = corpus_ids(lm, fit_table["prompt_text"], fit_table["prompt_id"])
    judged_ids = corpus_ids(lm, held_out["prompt_text"], held_out["prompt_id"])
    logging.info("fitting the %s lens of %s: %d prompts, %d tokens", kind, model, len(fit_ids), sum(map(len, fit_ids)))
    lens = fit_kind(lm, kind, fit_ids, steps=lenses["steps"], lr=lenses["lr"], **common)
    logit = fit_kind(lm, "logit", fit_ids, **common)
    last = lenses["held_out_positions"]
    logging.info("held-out KL: the last %d positions of %d prompts", last, len(judged_ids))
    (logit_kl, lens_kl), prompts = held_out_kls(lm, [logit, lens], judged_ids, batch, last)
lens.save(out.translators)
frames = [
    kl_by_block(kl, prompts, model=model, kind=name, n_boot=lenses["n_boot"], seed=lenses["seed"])
    for name, kl in (("logit", logit_kl), (kind, lens_kl))
]
write_csv(pd.concat(frames, ignore_index=True), out.kl)
