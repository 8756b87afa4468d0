"""Rule lens_robustness: each verdict its datasets give under the logit lens beside the verdict under every fitted
kind, one headline line per kind, and the blocks where the two lenses' entropies part."""

from pathlib import Path

import pandas as pd

from entropy_lens.analysis.features import FeatureSettings
from entropy_lens.analysis.separability.settings import KnnSettings
from entropy_lens.core.tables import to_markdown, write_csv
from entropy_lens.model.registry import folder_model_type
from entropy_lens.store import storage
from entropy_lens.verdicts.robustness import dataset_robustness, robustness_lines
from entropy_lens.verdicts.rows import Expected
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
params, out = snakemake.params, snakemake.output
knn = params.knn
settings = KnnSettings.from_config(knn)
features = FeatureSettings.from_config(knn)
architectures = {Path(folder).name: folder_model_type(folder) for folder in snakemake.input.models}
pairs = [tuple(pair) for pair in params.pairs]
logit_paths = dict(zip(pairs, snakemake.input.logit, strict=True))
lens_paths = dict(zip([(k, m, d) for k in params.kinds for m, d in pairs], snakemake.input.lens, strict=True))

changes, blocks = [], []
for dataset in dict.fromkeys(d for _, d in pairs):
    models = [m for m, d in pairs if d == dataset]
    logit = storage.open_all({m: logit_paths[m, dataset] for m in models}, load=True)
    lenses = {k: storage.open_all({m: lens_paths[k, m, dataset] for m in models}, load=True) for k in params.kinds}
    expected = Expected(
        **{**params.expected, "datasets": {dataset: models}, "layer_skip": []}, architectures=architectures
    )
    rows, parts = dataset_robustness(
        logit,
        lenses,
        dataset=dataset,
        labels={m: params.labels[m] for m in models},
        expected=expected,
        knn=settings,
        features=features,
        n_boot=params.n_boot,
        seed=params.seed,
        grid_points=params.grid_points,
    )
    changes.append(rows)
    blocks.append(parts)


def by_kind(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The datasets' rows kind by kind, in the configured order of kinds (each kind's rows in dataset order)."""
    table = pd.concat(frames, ignore_index=True)
    order = table["kind"].map({k: i for i, k in enumerate(params.kinds)})
    return table.iloc[order.argsort(kind="stable")].reset_index(drop=True)


table, by_block = by_kind(changes), by_kind(blocks)
write_csv(table, out.csv)
write_csv(by_block, out.blocks)
lines = ["# Do the verdicts survive a fitted lens?", ""]
lines += robustness_lines(table, params.kinds)
shown = [
    "dataset",
    "claim",
    "model",
    "split",
    "measure",
    "kind",
    "verdict_logit",
    "verdict_lens",
    "estimate_logit",
    "estimate_lens",
]
lines += ["", to_markdown(table[[*shown, "blocks"]])]
Path(out.md).write_text("\n".join(lines))
