"""Rule combine_profiles: one store per dataset with a model dim (NaN-padded layers), MMLU scores attached."""

from entropy_lens.core.tables import read_frames
from entropy_lens.store import storage
from entropy_lens.store.combine import combine_dataset
from entropy_lens.workflow.jobs import setup_logging, store_layout

setup_logging(snakemake)

stores = storage.open_all(dict(zip(snakemake.params.models, snakemake.input.stores, strict=True)), load=True)
combined = combine_dataset(stores, snakemake.params.labels, read_frames(snakemake.input.scores))
storage.write_profiles(combined, snakemake.output[0], combined=True, layout=store_layout(snakemake))
