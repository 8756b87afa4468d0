"""Rule results_manifest: the list of every artifact the run writes and the sha256 of every file outside the
stores, which `entropy-lens verify` checks."""

from entropy_lens.store.manifest import write_manifest
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)

write_manifest(snakemake.output[0], snakemake.params.outputs)
