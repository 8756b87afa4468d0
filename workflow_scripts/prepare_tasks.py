"""Rule prepare_tasks: TinyStories tasks x phrasings x templates, intact and scrambled."""

import logging

from entropy_lens.datasets import write_table
from entropy_lens.sources import read_local
from entropy_lens.stories import load_hub_stories, read_stories
from entropy_lens.tasks import build_tasks

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
tasks = snakemake.params.tasks
story_files = list(snakemake.input)
out_path = snakemake.output[0]

if tasks["source"] == "synthetic":
    stories = read_stories(story_files[0])
elif tasks["source"] == "hub":
    stories = load_hub_stories(4 * tasks["n_stories"])
else:
    stories = read_local(tasks["path"], {"story_id": tasks["id_column"], "text": tasks["text_column"]})
table = build_tasks(stories, seed=tasks["seed"], max_words=tasks["max_words"], n_stories=tasks["n_stories"])
provenance = {"story_source": tasks["source"], "synthetic": tasks["source"] == "synthetic", **stories.attrs}
write_table(table, out_path, "tasks", attrs=provenance)
