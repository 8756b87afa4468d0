"""Rule knn_baselines: the profile's kNN AUC beside its baselines on identical grouped folds (first-token profile
and prompt text for tasks and formats; final-layer entropy and top-letter probability for MMLU correctness; token 0's
final-layer entropy for the family)."""

from entropy_lens.analysis.features import FeatureSettings
from entropy_lens.analysis.separability.baselines import baseline_table
from entropy_lens.analysis.separability.settings import KnnSettings
from entropy_lens.core.tables import read_frames, write_table
from entropy_lens.store import storage
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
knn, out = snakemake.params.knn, snakemake.output
settings = KnnSettings.from_config(knn)
features = FeatureSettings.from_config(knn)

paths = {name: path for name, path in snakemake.input.items() if name != "scores"}
stores = storage.open_all(paths, combined=True)
table = baseline_table(stores, read_frames(snakemake.input.scores), features=features, settings=settings)
title = "Profile kNN AUC beside each baseline on identical grouped folds (profile - baseline, corrected 95% CI)"
write_table(table, out.csv, out.md, title=title)
