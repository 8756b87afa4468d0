"""Analyses of combined profile stores: one tidy pandas DataFrame per finding.

Modules:
    features   profiles -> per-prompt feature matrices (concat / mean / windows; masked-token rule).
    knn          cross-validated kNN ROC AUC per target, model and entropy measure.
    equivalence  Rényi minus Shannon AUC on identical folds (the Rényi equivalence test).
    heldout      each model of a shared family held out and classified by the other models' profiles.
    expansion    Delta H vs nucleus-size change (Spearman); adjacent-layer containment and Jaccard.
    families     blank-prompt fingerprints on a normalized-depth grid: distances, clustering, embeddings.
    pairs        same-family pairs: family, resolution and alignment gaps on three scales, bootstrapped.
    shapes       the family shape claims: rise, refine and plateau drift of mean profiles vs normalized depth.
    claims       the study's claims: names, roles (finding / precondition / extension), scopes, figures.
    verdicts     the rules that turn an estimate and its interval into reproduced / not reproduced / inconclusive.
    outcomes     layer skipping: three outcomes per comparison, and the study's direction where it names one.
    rows         the paper table's row: its columns, the one builder (rows_of) that turns a standard frame
                 (entropy_lens.core.frames) into rows under a claim's RowRule, and what the config expected.
    separability_rows, claim_rows, skip_rows, absent_rows   each kind of claim's row rules; the absences.
    paper        the study-vs-ours comparison table: every claim, our interval, the study's figure, a verdict.
    render       the table for readers: intervals as text, counts by role, Markdown, HTML, the terminal.

Every function reads lazily opened (dask-backed) stores one model slice at a time.
"""
