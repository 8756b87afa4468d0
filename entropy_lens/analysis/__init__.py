"""Analyses of combined profile stores: one tidy pandas DataFrame per finding.

The topics follow the claims the verdicts judge (``verdicts/claims/``); each subpackage's
``__init__`` holds its map only, so a module is imported by its full path.

Modules:
    features     profiles -> per-prompt feature matrices (concat / mean / windows; masked-token rule).
    depth        the common normalized-depth grid and linear resampling onto it.
    bands        mean profiles over depth per label value, with a band across prompts (for the figures).
    routing      Delta H against routing entropy in mixture-of-experts models.
    lens_fit     fit quality of a fitted lens per block (where the logit lens can be trusted).
    lens_curve   the fitted lens's learning curve (held-out KL per corpus size) and whether it stopped improving.
    schedule     the entropy schedule under each lens: ΔH beside the held-out KL, the KL bar, each lens's
                 expansion and pruning blocks.
    schedule_agreement  do two lenses read one schedule? their ΔH's Spearman over blocks, against a block permutation.

    separability/    does a profile carry a label?  kNN AUC beside its nulls and baselines.
        settings     the classifier's and folds' settings (KnnSettings, the study's defaults).
        folds        cross-validation folds planned from labels and groups (grouped / study protocols).
        knn          kNN and dummy ROC AUC on those folds, the paired test and intervals.
        targets      what the kNN predicts: the study's targets read off the stores, one table over them all.
        baselines    trivial readings of the same samples beside a profile's kNN AUC (first token, bag of words...).
        equivalence  Rényi minus Shannon AUC on identical folds (the Rényi equivalence test).
        heldout      each model of a shared family held out and classified by the other models' profiles.
        nulls        planted nulls of the separability rows (how often "beyond its null" is shown by chance).

    expansion/       does entropy track the top-p nucleus across layers?
        spearman     Delta H vs nucleus-size change (Spearman), and scatter points.
        overlap      adjacent-layer containment and Jaccard, overall and per layer.
        nulls        their cross-prompt nulls (layer l of a prompt against layer l + 1 of its partner).
        planted      planted data through the lens's functions (how often the nulls are beaten by chance).

    families/        blank-prompt fingerprints: family, not size.
        profiles     mean profiles per model and per sample, on own layers and on the depth grid.
        clustering   distances, hierarchical clustering against family and size, embeddings.
        shapes       the family shape claims: rise, refine and plateau drift of mean profiles vs depth.
        scales       the scales pairs are compared on (nats, normalized, centred) and the samples on them.
        gaps         one same-family pair's family, resolution and alignment gaps; subsampled errors.
        pairs        the same-family pairs of a store and their tables (size pairs, gaps with intervals).
        fingerprints everything the family analysis finds on one blank store (Fingerprints).

    twins/           what training put there: each claim on the trained models and on their random-init twins.
        contract     the twin table's columns, the twin's name, paired resampling over sources.
        separability the same kNN on the same grouped folds, trained against twin fold by fold.
        expansion    Spearman, containment and Jaccard, sources drawn together for both sides.
        families     profile shapes and same-family gaps on the twins' blank store.
        table        every twin reading of the stores both sides hold.

The verdicts these findings get are in :mod:`entropy_lens.verdicts`, a layer above; nothing here imports it.

Every function reads lazily opened (dask-backed) stores one model slice at a time.
"""
