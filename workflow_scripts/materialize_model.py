"""Rule materialize_model: save a fast-loading copy of one configured model."""

from entropy_lens.jobs import setup_logging
from entropy_lens.models import materialize_model

setup_logging(snakemake)
spec = snakemake.params.model

materialize_model(spec["source"], snakemake.output[0], family=spec["family"])
