"""Rule score_mmlu: each question's answer by raw and calibrated letter log-likelihood and by parsing.

The letter log-probabilities come from the extraction pass (the store's ``choice_logprob``);
only the tokenizer is loaded, to decode the completions.
"""

from entropy_lens.answers.letters import completions_of
from entropy_lens.answers.scoring import score_prompts, store_logprobs
from entropy_lens.model.loading import load_tokenizer
from entropy_lens.prompts.datasets import read_table
from entropy_lens.store import storage
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)

table = read_table(snakemake.input.table, "mmlu")
store = storage.open_profiles(snakemake.input.profiles)
prompt_ids = table["prompt_id"].tolist()
token_ids = store["token_id"].sel(prompt=prompt_ids).values
scores = score_prompts(
    table,
    store_logprobs(store, prompt_ids),
    completions_of(load_tokenizer(snakemake.input.model), token_ids),
    model=snakemake.wildcards.model,
)
scores.to_parquet(snakemake.output[0], index=False)
