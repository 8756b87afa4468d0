"""Rule materialize_model: save a fast-loading copy of one configured model."""

import logging

from entropy_lens.models import materialize_model

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
params = snakemake.params.model
out_dir = snakemake.output[0]

materialize_model(params["source"], out_dir, family=params["family"])
