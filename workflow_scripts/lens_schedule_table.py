"""Rule lens_schedule_table: every lens model's schedule under both lenses, as tables and a figure."""

import pandas as pd

from entropy_lens.analysis.schedule import KL_BAR
from entropy_lens.core.tables import read_csv_table, write_table
from entropy_lens.plots.lenses import plot_lens_schedule
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
inputs, out = snakemake.input, snakemake.output

schedule, choices, agreement = (
    pd.concat([read_csv_table(path) for path in paths], ignore_index=True)
    for paths in (inputs.schedule, inputs.choices, inputs.agreement)
)
write_table(schedule, out.csv, out.md, title=f"ΔH under each lens beside its held-out KL (bar {KL_BAR:g} nats)")
write_table(
    choices,
    out.choices,
    out.choices_md,
    title="The expansion and pruning blocks each lens selects among its blocks under the bar (-1: cannot be read)",
)
write_table(
    agreement,
    out.agreement,
    out.agreement_md,
    title="Do the two lenses read one schedule? Spearman of their ΔH over blocks, against a block-permutation null",
)
plot_lens_schedule(schedule, out.figure, bar=KL_BAR, title="The entropy schedule under each lens (held-out questions)")
