"""Rule lens_fit_table: the held-out KL of every lens kind per model and block, and the fitted lenses' learning
curves (held-out KL against the tokens fitted on, and whether the last doubling still improved it), as tables and
figures."""

import pandas as pd

from entropy_lens.analysis.lens_curve import curve_tables
from entropy_lens.analysis.lens_fit import lens_fit_table
from entropy_lens.analysis.schedule import KL_BAR
from entropy_lens.core.tables import read_csv_table, write_table
from entropy_lens.plots.lenses import plot_lens_curve, plot_lens_fit
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
out, params = snakemake.output, snakemake.params

table = lens_fit_table([read_csv_table(path) for path in snakemake.input.kl])
title = "Where each lens can be trusted: held-out KL (nats) to the model's final distribution, per block"
write_table(table, out.csv, out.md, title=title)
plot_lens_fit(table, out.figure, title="Held-out KL to the final layer\n(95% intervals over prompts)")

boot = {"n_boot": params.n_boot, "seed": params.seed}
found = [
    curve_tables(pd.read_parquet(path), model=model, kind=kind, **boot)
    for (model, kind), path in zip(params.jobs, snakemake.input.readings, strict=True)
]
curve, plateau = (pd.concat(parts, ignore_index=True) for parts in zip(*found, strict=True))
write_table(curve, out.curve, out.curve_md, title="The learning curve: held-out KL per block by the tokens fitted on")
write_table(
    plateau,
    out.plateau,
    out.plateau_md,
    title="Has the fit stopped improving? Mean held-out KL over blocks per corpus size, and each doubling's gain",
)
plot_lens_curve(curve, out.curve_figure, bar=KL_BAR, title="Held-out KL per block as the corpus doubles")
