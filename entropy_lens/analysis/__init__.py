"""Analyses of combined profile stores: one tidy pandas DataFrame per finding.

Modules:
    features   profiles -> per-prompt feature matrices (concat / mean / windows; masked-token rule).
    knn          cross-validated kNN ROC AUC per target, model and entropy measure.
    targets      what the kNN predicts: the study's targets read off the stores, one table over them all.
    knn_nulls    planted nulls of the separability rows (how often "beyond its null" is shown by chance).
    baselines    trivial readings of the same samples beside a profile's kNN AUC (first token, bag of words...).
    equivalence  Rényi minus Shannon AUC on identical folds (the Rényi equivalence test).
    heldout      each model of a shared family held out and classified by the other models' profiles.
    expansion    Delta H vs nucleus-size change (Spearman); adjacent-layer containment and Jaccard.
    expansion_nulls, expansion_planted   their cross-prompt nulls, and planted data through the lens's functions.
    routing      Delta H against routing entropy in mixture-of-experts models.
    lens_fit     fit quality of a fitted lens per block (where the logit lens can be trusted).
    families     blank-prompt fingerprints on a normalized-depth grid: distances, clustering, embeddings.
    pairs        same-family pairs: family, resolution and alignment gaps on three scales, bootstrapped.
    shapes       the family shape claims: rise, refine and plateau drift of mean profiles vs normalized depth.

The verdicts these findings get are in :mod:`entropy_lens.verdicts`, a layer above; nothing here imports it.

Every function reads lazily opened (dask-backed) stores one model slice at a time.
"""
