"""Rule layer_skip_eval: each question's correctness under every skip condition, and profiles under skip."""

from entropy_lens.answers.skipping import evaluate_conditions, read_conditions
from entropy_lens.lens.logit_lens import LensSettings
from entropy_lens.prompts.datasets import read_table
from entropy_lens.workflow.jobs import job_model, setup_logging

setup_logging(snakemake)
lens, out = snakemake.params.lens, snakemake.output

table = read_table(snakemake.input.evaluation, "mmlu")
with job_model(snakemake) as lm:
    correct, profiles = evaluate_conditions(
        lm,
        table,
        read_conditions(snakemake.input.conditions),
        lens=LensSettings.from_config(lens),
        batch_size=snakemake.params.batch_size,
        chat_template=snakemake.params.chat_template,
        profile_prompts=snakemake.params.profile_prompts,
    )
correct.assign(model=snakemake.wildcards.model).to_parquet(out.correct, index=False)
profiles.to_csv(out.profiles, index=False)
