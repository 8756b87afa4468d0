"""Rule score_mmlu: each question's answer by raw and calibrated letter log-likelihood and by parsing."""

from entropy_lens.answers.letters import completions_of
from entropy_lens.answers.scoring import score_prompts
from entropy_lens.prompts.datasets import read_table
from entropy_lens.store import storage
from entropy_lens.workflow.jobs import job_model, setup_logging

setup_logging(snakemake)
scoring = snakemake.params.scoring

table = read_table(snakemake.input.table, "mmlu")
token_ids = storage.open_profiles(snakemake.input.profiles)["token_id"].sel(prompt=table["prompt_id"].tolist()).values
with job_model(snakemake) as lm:
    scores = score_prompts(
        lm,
        table,
        completions_of(lm.tokenizer, token_ids),
        model=snakemake.wildcards.model,
        batch_size=scoring["batch_size"],
        chat_template=scoring["chat_template"],
    )
scores.to_parquet(snakemake.output[0], index=False)
