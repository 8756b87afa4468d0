"""Rule generate_stories: write the offline TinyStories-like corpus with an embedded model."""

import logging

from entropy_lens.models import load_model
from entropy_lens.stories import generate_stories, write_stories

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
model_dir = snakemake.input.model
settings = snakemake.params.stories
n_stories = snakemake.params.n_stories
out_path = snakemake.output[0]

lm = load_model(model_dir, device="cpu")
stories, provenance = generate_stories(
    lm,
    n_stories,
    seed=settings["seed"],
    max_new_tokens=settings["max_new_tokens"],
    temperature=settings["temperature"],
)
write_stories(stories, out_path, provenance)
