"""Rule twin_model: a model's random-init twin, its own config and tokenizer with every weight drawn from the seed."""

from entropy_lens.model.twin import build_twin
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)

build_twin(snakemake.input[0], snakemake.output[0], seed=snakemake.params.seed, name=snakemake.wildcards.model)
