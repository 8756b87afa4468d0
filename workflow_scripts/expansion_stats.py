"""Rule expansion_stats: Delta H vs nucleus-size change (Spearman) and adjacent-layer overlap
(Jaccard and containment, overall and per layer), bootstrapped over sources, and each row's planted draws on its
own design."""

import pandas as pd

from entropy_lens.analysis.expansion.overlap import nucleus_overlap, overlap_by_depth
from entropy_lens.analysis.expansion.planted_draws import overlap_draws, spearman_draws
from entropy_lens.analysis.expansion.spearman import expansion_points, expansion_spearman
from entropy_lens.core.draws import DrawSettings
from entropy_lens.core.tables import write_csv, write_table
from entropy_lens.plots.expansion import plot_expansion, plot_overlap_depth
from entropy_lens.store import storage
from entropy_lens.verdicts.decision import NULL_MARGINS
from entropy_lens.verdicts.planted_nulls import draw_shown
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
seed, n_boot, dataset, out = (
    snakemake.params.seed,
    snakemake.params.n_boot,
    snakemake.wildcards.dataset,
    snakemake.output,
)

ds = storage.open_profiles(snakemake.input[0], combined=True)
spearman = expansion_spearman(ds, n_boot=n_boot, seed=seed).assign(dataset=dataset)
write_table(spearman, out.spearman, out.spearman_md, title=f"Spearman ΔH vs Δ nucleus size: {dataset}")
write_table(
    nucleus_overlap(ds, n_boot=n_boot, seed=seed).assign(dataset=dataset),
    out.overlap,
    out.overlap_md,
    title=f"adjacent-layer nucleus overlap (Jaccard, containment): {dataset}",
)
by_depth = overlap_by_depth(ds, n_boot=n_boot, seed=seed)
write_table(
    by_depth.assign(dataset=dataset),
    out.overlap_depth,
    out.overlap_depth_md,
    title=f"adjacent-layer nucleus overlap by layer: {dataset}",
)
plot_overlap_depth(by_depth, out.overlap_png, title=f"adjacent-layer nucleus overlap: {dataset}")
plot_expansion(expansion_points(ds, seed=seed), out.png, spearman=spearman, title=f"expansion vs nucleus: {dataset}")

# Each row's planted draws on its own design; the verdicts judge every draw through the row's own rule.
draws = DrawSettings(seed=seed)
planted = [
    spearman_draws(ds, n_boot=n_boot, seed=seed, shown=draw_shown(NULL_MARGINS["rho"]), draws=draws),
    overlap_draws(ds, n_boot=n_boot, seed=seed, shown=draw_shown(NULL_MARGINS["containment"]), draws=draws),
]
write_csv(pd.concat(planted, ignore_index=True).assign(dataset=dataset), out.planted)
