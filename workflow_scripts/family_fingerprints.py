"""Rule family_fingerprints: blank-prompt profiles on a depth grid, clustered by family vs size."""

import logging

from entropy_lens import storage
from entropy_lens.analysis import to_markdown
from entropy_lens.analysis.families import (
    clustering_scores,
    embed_samples,
    layer_profiles,
    linkage_matrix,
    mean_profiles,
    model_distances,
    sample_profiles,
    shape_descriptors,
    size_pairs,
)
from entropy_lens.plots import plot_dendrogram, plot_embedding

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
store_path, grid_points, seed = snakemake.input[0], snakemake.params.grid_points, snakemake.params.seed
out = snakemake.output

ds = storage.open_profiles(store_path, combined=True)
layers = layer_profiles(ds)
means = mean_profiles(layers, grid_points)
samples = sample_profiles(ds, grid_points=grid_points)
clustering = clustering_scores(samples)
model_distances(means).to_csv(out.distances)
clustering.to_csv(out.clustering, index=False)
with open(out.clustering_md, "w") as handle:
    handle.write(to_markdown(clustering) + "\n")
size_pairs(layers, grid_points=grid_points).to_csv(out.size_pairs, index=False)
shape_descriptors(layers).to_csv(out.shapes, index=False)
names = [str(m) for m in means["model"].values]
families = [str(f) for f in means["family"].values]
plot_dendrogram(linkage_matrix(means), names, out.dendrogram, families=families, title="blank-prompt profiles")
plot_embedding(embed_samples(samples, method="pca", seed=seed), out.pca, title="PCA of blank-prompt profiles")
perplexity = max(2.0, min(30.0, (samples.shape[0] - 1) / 3))
plot_embedding(embed_samples(samples, method="tsne", perplexity=perplexity, seed=seed), out.tsne, title="t-SNE")
