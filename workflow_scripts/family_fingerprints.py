"""Rule family_fingerprints: blank-prompt profiles on a depth grid, clustered by family vs size; same-family pairs."""

from entropy_lens.analysis.families.fingerprints import fingerprints
from entropy_lens.analysis.families.pairs import family_pairs
from entropy_lens.core.tables import write_csv, write_table
from entropy_lens.plots.families import plot_fingerprints
from entropy_lens.store import storage
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
out, params = snakemake.output, snakemake.params

blank = storage.open_profiles(snakemake.input[0], combined=True)
found = fingerprints(blank, grid_points=params.grid_points, seed=params.seed)
pairs = family_pairs(blank, grid_points=params.grid_points, n_boot=params.n_boot, seed=params.seed)
write_csv(found.distances, out.distances, index=True)
write_table(found.clustering, out.clustering, out.clustering_md, title="family clustering of blank-prompt profiles")
write_table(
    pairs,
    out.pairs,
    out.pairs_md,
    title="same-family pairs (gaps in nats; normalized: fractions of log V; centred: nats)",
)
write_csv(found.size_pairs, out.size_pairs)
write_csv(found.shapes, out.shapes)
plot_fingerprints(found, dendrogram=out.dendrogram, pca=out.pca, tsne=out.tsne)
