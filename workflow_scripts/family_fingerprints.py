"""Rule family_fingerprints: blank-prompt profiles on a depth grid, clustered by family vs size."""

from entropy_lens.analysis.families import fingerprints
from entropy_lens.plots import plot_fingerprints
from entropy_lens.store import storage
from entropy_lens.workflow.jobs import setup_logging
from entropy_lens.workflow.tables import write_table

setup_logging(snakemake)
out = snakemake.output

found = fingerprints(
    storage.open_profiles(snakemake.input[0], combined=True),
    grid_points=snakemake.params.grid_points,
    seed=snakemake.params.seed,
)
found.distances.to_csv(out.distances)
write_table(found.clustering, out.clustering, out.clustering_md, title="family clustering of blank-prompt profiles")
found.size_pairs.to_csv(out.size_pairs, index=False)
found.shapes.to_csv(out.shapes, index=False)
plot_fingerprints(found, dendrogram=out.dendrogram, pca=out.pca, tsne=out.tsne)
