"""Random-init twins: each learned-structure claim read on a model of the same architecture with its weights
drawn anew, and trained - twin paired over the claim's unit (docs/verdicts.md, "Beyond the twin").

``contract`` (the table's columns, the twin's name, paired resampling over sources) -> ``separability`` (the
same kNN on the same grouped folds), ``expansion`` (Spearman, containment, Jaccard), ``families`` (shapes,
same-family gaps) -> ``table`` (every reading of the stores both sides hold).  Import each module by its full
path; this file re-exports nothing.
"""
