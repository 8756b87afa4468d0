"""Rule prepare_lens_corpus: the questions a fitted lens learns from and is judged on, outside every analysed set."""

import logging

import pandas as pd

from entropy_lens.prompts.datasets import QUESTION_ID, read_table, write_table
from entropy_lens.prompts.mmlu import lens_corpus_tables, load_questions
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
lenses, source, out = snakemake.params.lenses, snakemake.params.source, snakemake.output

analysed = [read_table(path, "mmlu") for path in snakemake.input.analysed]
exclude = sorted(set(pd.concat([t[QUESTION_ID].astype(str) for t in analysed])) if analysed else set())
fit, held_out = lens_corpus_tables(
    load_questions(source["source"], source["path"], lenses["corpus_split"]),
    exclude=exclude,
    n_fit=lenses["fit_prompts"],
    n_held_out=lenses["held_out_prompts"],
    seed=lenses["seed"],
)
logging.info(
    "lens corpus: %d fit and %d held-out questions, %d analysed ones left out", len(fit), len(held_out), len(exclude)
)
write_table(fit, out.fit, "mmlu")
write_table(held_out, out.held_out, "mmlu")
