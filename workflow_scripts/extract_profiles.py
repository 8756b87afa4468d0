"""Rule extract_profiles: profile one model on one prompt set (or one shard of it) into a store."""

from entropy_lens.lens.encoding import PromptSettings
from entropy_lens.lens.extract import Shard, extract_table
from entropy_lens.lens.translators import Translators
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.prompts.datasets import read_table
from entropy_lens.store import storage
from entropy_lens.workflow.jobs import job_model, lens_settings, setup_logging, store_layout

setup_logging(snakemake)
gen = snakemake.params.generation
dataset, shard = snakemake.wildcards.dataset, Shard.of(snakemake.params.shard)

table = read_table(snakemake.input.table, dataset)
# extract_lens_profiles reads the residuals through fitted translators; extract_profiles through the logit lens.
fitted = dict(snakemake.input.items()).get("translators")
translators = Translators.load(fitted) if fitted else None
with job_model(snakemake) as lm:
    ds = extract_table(
        lm,
        table,
        dataset,
        generation=GenerationSettings.from_config(gen),
        lens=lens_settings(snakemake),
        prompting=PromptSettings.from_config(gen),
        shard=shard,
        choices=gen["choices"],
        translators=translators,
    )
storage.write_profiles(ds, snakemake.output[0], layout=store_layout(snakemake))
