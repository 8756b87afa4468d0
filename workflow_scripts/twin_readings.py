"""Rule twin_readings: every learned-structure claim on the trained models and on their random-init twins, and
trained - twin paired over the claim's unit (results/tables/twins.csv)."""

from entropy_lens.analysis.features import FeatureSettings
from entropy_lens.analysis.separability.settings import KnnSettings
from entropy_lens.analysis.twins.table import twin_table
from entropy_lens.core.tables import write_table
from entropy_lens.store import storage
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
params, out = snakemake.params, snakemake.output
datasets = params.datasets

trained = storage.open_all(dict(zip(datasets, snakemake.input.trained, strict=True)), combined=True)
twins = storage.open_all(dict(zip(datasets, snakemake.input.twins, strict=True)), combined=True)
table = twin_table(
    trained,
    twins,
    twin_seed=params.twin_seed,
    mmlu=params.mmlu,
    features=FeatureSettings.from_config(params.knn),
    settings=KnnSettings.from_config(params.knn),
    n_boot=params.n_boot,
    seed=params.seed,
    grid_points=params.grid_points,
)
title = (
    "Each learned-structure claim on the trained models and on their random-init twins (trained - twin, paired 95% CI)"
)
write_table(table, out.csv, out.md, title=title)
