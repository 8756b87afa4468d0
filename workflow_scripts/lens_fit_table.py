"""Rule lens_fit_table: the held-out KL of every lens kind per model and block, as a table and a figure."""

from entropy_lens.analysis.lens_fit import lens_fit_table
from entropy_lens.core.tables import read_csv_table, write_table
from entropy_lens.plots.lenses import plot_lens_fit
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
out = snakemake.output

table = lens_fit_table([read_csv_table(path) for path in snakemake.input])
title = "Where each lens can be trusted: held-out KL (nats) to the model's final distribution, per block"
write_table(table, out.csv, out.md, title=title)
plot_lens_fit(table, out.figure, title="Held-out KL to the final layer\n(95% intervals over prompts)")
