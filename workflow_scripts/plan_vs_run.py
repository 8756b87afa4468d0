"""Rule plan_vs_run: every planned model job, its predicted and measured seconds and peak memory, side by side."""

from pathlib import Path

from entropy_lens.core.tables import write_table
from entropy_lens.workflow import plan as planning
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
out, config = snakemake.output, snakemake.config

tables = {Path(path).stem: path for path in snakemake.input.tables}
model_dirs = {Path(folder).name: folder for folder in snakemake.input.models}
plan = planning.plan_from_config(config, tables=tables, model_dirs=model_dirs)
patterns, logs = planning.run_records(config, snakemake.params.benchmarks, snakemake.params.logs)
table = planning.plan_vs_run(plan, patterns, logs)
title = "The cost plan against the run: predicted / measured seconds and peak memory per model job"
write_table(table, out.csv, out.md, title=title)
