"""Separability: does an entropy profile carry a label (task, format, correctness, family)?

Cross-validated kNN ROC AUC per target, model and entropy measure, beside the stratified dummy on the
same folds, trivial baselines, the Rényi equivalence test, the held-out family and planted nulls:
``settings`` -> ``folds`` -> ``knn`` -> ``targets`` / ``baselines`` / ``equivalence`` / ``heldout`` /
``nulls``.  Import each module by its full path; this file re-exports nothing.
"""
