"""The kNN classifier's and its cross-validation's settings (:class:`KnnSettings`), with the study's defaults.

Defaults follow the study's code: ``k = 29``, Euclidean distance, uniform weights; stratified
``n_splits``-fold CV with shuffling, repeated ``n_repeats`` times with a seed (see
:mod:`entropy_lens.analysis.separability.knn`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from entropy_lens.core.folds import DEFAULT_TEST, PAIRED_TESTS

DEFAULT_K = 29
DEFAULT_SPLITS = 5
DEFAULT_REPEATS = 3
DEFAULT_SEED = 0
DEFAULT_DISTANCE = "euclidean"
DEFAULT_WEIGHTS = "uniform"
DEFAULT_LEVEL = 0.95
# OpenMP threads for the neighbour search.  With torch imported, two OpenMP runtimes share
# the cores and each small brute-force kNN call stalls for ~30-80 ms in spin-waits; one
# thread avoids that and costs little at the study's scale (thousands of samples).
DEFAULT_THREADS = 1


@dataclass(frozen=True)
class KnnSettings:
    """Classifier and cross-validation settings.

    Attributes:
        k: Neighbours (capped below the smallest training fold, with a warning).
        n_splits: Stratified folds (capped at the smallest class count, or its number of
            groups under grouped folds, with a warning). The floor an interval needs (folds >= 3, folds x
            repeats >= 6: :func:`entropy_lens.core.folds.check_fold_counts`) is the config's, checked where it is
            read; the settings trust it, and scikit-learn refuses fewer than 2.
        n_repeats: Repetitions of the shuffled fold split.
        seed: Seed of the fold shuffling and of the dummy baseline.
        distance: ``KNeighborsClassifier`` metric.
        weights: ``KNeighborsClassifier`` weights.
        test: Paired test over fold AUCs, one of :data:`PAIRED_TESTS`.
        level: Coverage of the AUC intervals, in ``(0, 1)``.
        n_threads: OpenMP threads for the neighbour search (``None``: the library default).
    """

    k: int = DEFAULT_K
    n_splits: int = DEFAULT_SPLITS
    n_repeats: int = DEFAULT_REPEATS
    seed: int = DEFAULT_SEED
    distance: str = DEFAULT_DISTANCE
    weights: str = DEFAULT_WEIGHTS
    test: str = DEFAULT_TEST
    level: float = DEFAULT_LEVEL
    n_threads: int | None = DEFAULT_THREADS

    @classmethod
    def from_config(cls, knn: Mapping[str, Any]) -> KnnSettings:
        """The settings of a validated ``analysis.knn`` config section (its ``folds`` and ``repeats`` are
        :attr:`n_splits` and :attr:`n_repeats`; the paired test is the corrected resampled t, the one the
        intervals use)."""
        return cls(k=knn["k"], n_splits=knn["folds"], n_repeats=knn["repeats"], seed=knn["fold_seed"])

    def __post_init__(self) -> None:
        for name in ("k", "n_repeats"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive int, got {getattr(self, name)!r}")
        if self.test not in PAIRED_TESTS:
            raise ValueError(f"test must be one of {PAIRED_TESTS}, got {self.test!r}")
        if not 0 < self.level < 1:
            raise ValueError(f"level must lie in (0, 1), got {self.level!r}")
