"""Rule materialize_model: save a fast-loading copy of one configured model."""

from entropy_lens.model.loading import materialize_model
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
spec = snakemake.params.model

materialize_model(spec["source"], snakemake.output[0], family=spec["family"])
