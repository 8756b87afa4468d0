"""Rule knn_auc: kNN AUC for every study target, Shannon and each Renyi alpha."""

import logging

from entropy_lens import storage
from entropy_lens.analysis import to_markdown
from entropy_lens.analysis.features import FeatureSettings
from entropy_lens.analysis.knn import KnnSettings, knn_table
from entropy_lens.plots import plot_auc_bars

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
store_paths = dict(snakemake.input.items())
knn = snakemake.params.knn
csv_path, md_path, png_path = snakemake.output.csv, snakemake.output.md, snakemake.output.png

stores = {name: storage.open_profiles(path, combined=True) for name, path in store_paths.items()}
table = knn_table(
    stores,
    alphas=[a for a in knn["alphas"] if a != 1.0],
    features=FeatureSettings(mode=knn["feature"], n_windows=knn["windows"]),
    settings=KnnSettings(
        k=knn["k"], n_splits=knn["folds"], n_repeats=knn["repeats"], seed=knn["seed"], test=knn["test"]
    ),
)
table.to_csv(csv_path, index=False)
with open(md_path, "w") as handle:
    handle.write(to_markdown(table) + "\n")
plot_auc_bars(table, png_path, title="kNN AUC per target and entropy measure")
