"""Rule prepare_layer_skip: disjoint MMLU calibration and evaluation questions in one style."""

from entropy_lens.prompts.datasets import write_table
from entropy_lens.prompts.mmlu import layer_skip_tables, load_questions
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
skip, source, out = snakemake.params.skip, snakemake.params.source, snakemake.output

calibration, evaluation = layer_skip_tables(
    load_questions(source["source"], source["path"]),
    n_calibration=skip["calibration_questions"],
    n_eval=skip["eval_questions"],
    style=skip["style"],
    seed=skip["seed"],
)
write_table(calibration, out.calibration, "mmlu")
write_table(evaluation, out.evaluation, "mmlu")
