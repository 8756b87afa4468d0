"""Rule generate_stories: write the offline TinyStories-like corpus with an embedded model."""

from entropy_lens.prompts.stories import generate_stories, write_stories
from entropy_lens.workflow.jobs import job_model, setup_logging

setup_logging(snakemake)
settings, n_stories = snakemake.params.stories, snakemake.params.n_stories

with job_model(snakemake) as lm:
    stories, provenance = generate_stories(
        lm,
        n_stories,
        seed=settings["seed"],
        max_new_tokens=settings["max_new_tokens"],
        temperature=settings["temperature"],
    )
write_stories(stories, snakemake.output[0], provenance)
