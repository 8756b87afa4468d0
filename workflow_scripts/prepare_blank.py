"""Rule prepare_blank: empty prompts (BOS alone) with per-sample sampling seeds."""

from entropy_lens.prompts.datasets import build_blank, write_table
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
blank = snakemake.params.blank

write_table(build_blank(blank["n_samples"], blank["seed"]), snakemake.output[0], "blank")
