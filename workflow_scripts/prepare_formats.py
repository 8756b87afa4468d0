"""Rule prepare_formats: poem / scientific blurb / chat log over the shipped topics."""

import logging

import numpy as np

from entropy_lens.datasets import build_formats, load_topics, write_table

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
formats = snakemake.params.formats
out_path = snakemake.output[0]

topics = load_topics()
if formats["n_topics"]:
    rng = np.random.default_rng(formats["seed"])
    topics = sorted(rng.choice(topics, formats["n_topics"], replace=False).tolist())
write_table(build_formats(topics), out_path, "formats")
