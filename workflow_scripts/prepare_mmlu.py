"""Rule prepare_mmlu: MMLU questions in the configured styles, stratified by subject."""

from entropy_lens.prompts.datasets import write_table
from entropy_lens.prompts.mmlu import build_mmlu, load_questions
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
mmlu = snakemake.params.mmlu

questions = load_questions(mmlu["source"], mmlu.get("path"))
table = build_mmlu(
    questions, n=mmlu["n_questions"] or None, seed=mmlu["seed"], styles=mmlu["styles"], n_shot=mmlu["n_shot"]
)
write_table(table, snakemake.output[0], "mmlu", attrs={"source": mmlu["source"]})
