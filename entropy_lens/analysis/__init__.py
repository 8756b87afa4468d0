"""Analyses of combined profile stores: one tidy pandas DataFrame per finding.

Modules:
    features   profiles -> per-prompt feature matrices (concat / mean / windows; masked-token rule).
    knn        cross-validated kNN ROC AUC per target, model and entropy measure.
    expansion  Delta H vs nucleus-size change (Spearman) and adjacent-layer nucleus overlap.
    families   blank-prompt fingerprints on a normalized-depth grid: distances, clustering, embeddings.
    pairs      same-family pairs vs other families: family and resolution gaps, bootstrapped over blank samples.
    shapes     the family shape claims: rise, refine and plateau drift of mean profiles vs normalized depth.
    verdicts   the rules that turn an estimate and its interval into reproduced / not reproduced / inconclusive.
    paper      the study-vs-ours comparison table: every claim, our interval, the study's figure, a verdict.

Every function reads lazily opened (dask-backed) stores one model slice at a time.
"""
