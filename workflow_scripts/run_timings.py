"""Rule run_timings: seconds and peak memory of every job of the run, from Snakemake's benchmark files."""

from entropy_lens.core.tables import write_table
from entropy_lens.workflow.jobs import setup_logging
from entropy_lens.workflow.timings import timing_table

setup_logging(snakemake)
out = snakemake.output

table = timing_table(snakemake.params.folder)
write_table(table, out.csv, out.md, title="Where the run's time went (Snakemake benchmark files, one row per rule)")
