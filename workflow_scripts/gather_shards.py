"""Rule gather_shards: join the shard stores of one (model, dataset) into its per-model store."""

from entropy_lens.prompts.datasets import PROMPT_ID, read_table
from entropy_lens.store import storage
from entropy_lens.store.combine import gather_shards
from entropy_lens.workflow.jobs import setup_logging, store_layout

setup_logging(snakemake)

table = read_table(snakemake.input.table, snakemake.wildcards.dataset)
shards = list(storage.open_all(dict(enumerate(snakemake.input.shards)), load=True).values())
gathered = gather_shards(shards, table[PROMPT_ID].tolist())
storage.write_profiles(gathered, snakemake.output[0], layout=store_layout(snakemake))
