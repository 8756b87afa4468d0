"""Rule prepare_images: labelled images (folder, path list or hub) as a table holding each encoded image."""

from entropy_lens.prompts.datasets import write_table
from entropy_lens.prompts.images import build_images, image_records
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
images = snakemake.params.images

table = build_images(image_records(images), n_images=images["n_images"], seed=images["seed"])
write_table(table, snakemake.output[0], "images", attrs={"source": images["source"]})
