"""Rule prepare_formats: poem / scientific blurb / chat log over a seeded sample of the shipped topics."""

from entropy_lens.prompts.datasets import build_formats, sample_topics, write_table
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
formats = snakemake.params.formats

write_table(build_formats(sample_topics(formats["n_topics"], formats["seed"])), snakemake.output[0], "formats")
