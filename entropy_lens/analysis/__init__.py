"""Analyses of combined profile stores: one tidy pandas DataFrame per finding.

Modules:
    features   profiles -> per-prompt feature matrices (concat / mean / windows; masked-token rule).
    knn        cross-validated kNN ROC AUC per target, model and entropy measure.
    expansion  Delta H vs nucleus-size change (Spearman) and adjacent-layer nucleus overlap.
    families   blank-prompt fingerprints on a normalized-depth grid: distances, clustering, embeddings.
    paper      the study-vs-ours comparison table and a Markdown renderer.

Every function reads lazily opened (dask-backed) stores one model slice at a time.
"""

from entropy_lens.analysis.paper import to_markdown

__all__ = ["to_markdown"]
