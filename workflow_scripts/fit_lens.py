"""Rule fit_lens: fit one model's translators of one kind (the linear lens at each size of its learning curve), and
read them and the logit lens on held-out prompts: KL to the model's final distribution and entropy, per token and
block."""

import logging

import pandas as pd

from entropy_lens.analysis.lens_fit import kl_by_block, readings_frame
from entropy_lens.core.tables import write_csv
from entropy_lens.lens.fitting import corpus_ids, fit_curve, fit_kind
from entropy_lens.lens.held_out import held_out_tokens, read_held_out
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
    last = lenses["held_out_positions"]
    logging.info("held-out tokens: the last %d positions of %d prompts", last, len(judged_ids))
    held = held_out_tokens(lm, judged_ids, batch, last)
    logit = read_held_out(lm, fit_kind(lm, "logit", fit_ids, **common), held)
    prompts = held_out["prompt_id"].astype(str).to_numpy()[held.prompts]
    frames = [readings_frame(logit.kl, logit.entropy, prompts, lens="logit", fit_prompts=0, fit_tokens=0)]
    fits = fit_curve(lm, kind, fit_ids, points=lenses["curve_points"], steps=lenses["steps"], lr=lenses["lr"], **common)
    for n_prompts, n_tokens, lens in fits:
        logging.info("the %s lens of %s on %d prompts (%d tokens): reading it", kind, model, n_prompts, n_tokens)
        reading = read_held_out(lm, lens, held)
        frames.append(
            readings_frame(reading.kl, reading.entropy, prompts, lens=kind, fit_prompts=n_prompts, fit_tokens=n_tokens)
        )
lens.save(out.translators)
pd.concat(frames, ignore_index=True).to_parquet(out.readings, index=False)
boot = {"n_boot": lenses["n_boot"], "seed": lenses["seed"]}
kl = [kl_by_block(k, prompts, model=model, kind=name, **boot) for name, k in (("logit", logit.kl), (kind, reading.kl))]
write_csv(pd.concat(kl, ignore_index=True), out.kl)
