"""Rule family_shapes: rise, refine and plateau spread of each model's mean profile per dataset, source-bootstrapped."""

import pandas as pd

from entropy_lens.analysis.families.shapes import profile_shapes
from entropy_lens.core.tables import write_table
from entropy_lens.store import storage
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
n_boot, seed, out = snakemake.params.n_boot, snakemake.params.seed, snakemake.output

stores = storage.open_all(dict(snakemake.input.items()), combined=True)
table = pd.concat(
    [profile_shapes(ds, n_boot=n_boot, seed=seed).assign(dataset=name) for name, ds in stores.items()],
    ignore_index=True,
)
write_table(table, out.csv, out.md, title="profile shape per model and dataset (family shape claims)")
