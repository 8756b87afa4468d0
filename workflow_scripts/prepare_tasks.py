"""Rule prepare_tasks: TinyStories tasks x phrasings x templates, intact and scrambled."""

from entropy_lens.prompts.datasets import write_table
from entropy_lens.prompts.stories import load_stories
from entropy_lens.prompts.tasks import build_tasks
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
tasks = snakemake.params.tasks

stories = load_stories(
    tasks["source"],
    n=tasks["n_stories"],
    story_file=next(iter(snakemake.input), None),
    path=tasks.get("path"),
    id_column=tasks["id_column"],
    text_column=tasks["text_column"],
)
table = build_tasks(stories, seed=tasks["seed"], max_words=tasks["max_words"], n_stories=tasks["n_stories"])
write_table(table, snakemake.output[0], "tasks", attrs=stories.attrs)
