"""Rule prepare_blank: empty prompts (BOS alone) with per-sample sampling seeds."""

import logging

from entropy_lens.datasets import build_blank, write_table

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
blank = snakemake.params.blank
out_path = snakemake.output[0]

write_table(build_blank(blank["n_samples"], blank["seed"]), out_path, "blank")
