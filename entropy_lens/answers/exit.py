"""The exit curve: where the MMLU answer forms, read through the logit lens at every block.

Pure NumPy/pandas over :class:`~entropy_lens.answers.readings.BlockReadings` (the answer letters'
log-probabilities and the lens entropy at the answer position of ``x_0 .. x_L``):

* :func:`exit_curve`: per position ``p`` (the residual after ``p`` blocks; ``p = L`` is the model's own
  answer), the accuracy of reading the answer there (raw letter log-likelihood, and calibrated by the
  letter prior of the same position), the gold letter's log-probability among the four, and the mean
  lens entropy, beside which the expansion and pruning phases show;
* :func:`threshold_exit`: stop at the first block whose lens entropy falls below ``tau`` (the full
  model where none does): accuracy against the mean blocks used, over a grid of ``tau``, beside the
  accuracy of a fixed exit after as many blocks (rounded).

This is the logit lens read at earlier blocks, not a trained early-exit head: a low accuracy at a
shallow block may be the lens's bias as much as the answer not having formed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from entropy_lens.answers.letters import calibrate
from entropy_lens.answers.readings import BlockReadings
from entropy_lens.core.intervals import DEFAULT_LEVEL, wilson_interval
from entropy_lens.prompts.datasets import LETTERS

MEASURES = ("ll", "calibrated")
DEFAULT_TAUS = 24
EXIT_COLUMNS = (
    "model",
    "measure",
    "position",
    "depth",
    "n",
    "accuracy",
    "ci_low",
    "ci_high",
    "gold_logprob",
    "entropy",
)
THRESHOLD_COLUMNS = ("model", "measure", "tau", "n", "mean_blocks", "accuracy", "ci_low", "ci_high", "fixed_accuracy")


def gold_indices(answers: Sequence[str]) -> np.ndarray:
    """``[N]`` indices of letter answers ``A``..``D``.

    Raises:
        ValueError: naming the first answer that is not one of the letters.
    """
    out = []
    for i, answer in enumerate(answers):
        text = str(answer).strip().upper()
        if text not in LETTERS:
            raise ValueError(f"answer {i} is {answer!r}; expected one of {LETTERS}")
        out.append(LETTERS.index(text))
    return np.asarray(out, dtype=np.int64)


def _scores(readings: BlockReadings, styles: Sequence[str], measure: str) -> np.ndarray:
    """``[N, L+1, C]`` letter scores under ``measure``: raw, or calibrated per position by its own letter prior."""
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}, got {measure!r}")
    if measure == "ll":
        return readings.letters
    positions = readings.letters.shape[1]
    return np.stack([calibrate(readings.letters[:, p], styles) for p in range(positions)], axis=1)


def _correct(scores: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """``[N, L+1]`` whether the argmax letter at each position is the gold one."""
    return scores.argmax(axis=2) == gold[:, None]


def _check(readings: BlockReadings, answers: Sequence[str], styles: Sequence[str]) -> np.ndarray:
    n = len(readings.questions)
    if len(answers) != n or len(styles) != n:
        raise ValueError(
            f"need one answer and one style per recorded question ({n}), got {len(answers)}, {len(styles)}"
        )
    return gold_indices(answers)


def exit_curve(
    readings: BlockReadings, answers: Sequence[str], styles: Sequence[str], model: str, *, level: float = DEFAULT_LEVEL
) -> pd.DataFrame:
    """Per measure and position ``0..L``: the answer read there through the logit lens (:data:`EXIT_COLUMNS`).

    ``gold_logprob`` is the gold letter's log-probability among the four raw letter scores (nats),
    the same at both measures; ``entropy`` the mean lens entropy (nats).
    """
    gold = _check(readings, answers, styles)
    n, positions = readings.entropy.shape
    raw = readings.letters - np.logaddexp.reduce(readings.letters, axis=2, keepdims=True)
    gold_logp = np.take_along_axis(raw, gold[:, None, None], axis=2)[:, :, 0].mean(axis=0)
    rows = []
    for measure in MEASURES:
        correct = _correct(_scores(readings, styles, measure), gold)
        for p in range(positions):
            hits = int(correct[:, p].sum())
            low, high = wilson_interval(hits, n, level)
            rows.append(
                {
                    "model": model,
                    "measure": measure,
                    "position": p,
                    "depth": p / (positions - 1),
                    "n": n,
                    "accuracy": hits / n,
                    "ci_low": low,
                    "ci_high": high,
                    "gold_logprob": float(gold_logp[p]),
                    "entropy": float(readings.entropy[:, p].mean()),
                }
            )
    return pd.DataFrame(rows, columns=list(EXIT_COLUMNS))


def exit_positions(entropy: np.ndarray, tau: float) -> np.ndarray:
    """``[N]`` per question the first position ``p >= 1`` whose lens entropy is below ``tau``; ``L`` where none is.

    Args:
        entropy: ``[N, L+1]`` lens entropy at positions ``0..L`` (nats); position 0 (the embeddings) never exits.
        tau: Threshold in nats.
    """
    values = np.asarray(entropy, dtype=np.float64)[:, 1:]  # [N, L]
    below = values < tau
    last = values.shape[1]
    return np.where(below.any(axis=1), below.argmax(axis=1) + 1, last)


def tau_grid(entropy: np.ndarray, n: int = DEFAULT_TAUS) -> np.ndarray:
    """``n`` thresholds spanning the lens entropies past the embeddings (quantiles, and just above the largest)."""
    values = np.asarray(entropy, dtype=np.float64)[:, 1:].ravel()
    grid = np.quantile(values, np.linspace(0.0, 1.0, n))
    return np.unique(np.append(grid[:-1], grid[-1] + 1e-6))


def threshold_exit(
    readings: BlockReadings,
    answers: Sequence[str],
    styles: Sequence[str],
    model: str,
    *,
    taus: Sequence[float] | None = None,
    level: float = DEFAULT_LEVEL,
) -> pd.DataFrame:
    """Per measure and ``tau``: accuracy of exiting at the first block whose lens entropy falls below ``tau``.

    Returns:
        :data:`THRESHOLD_COLUMNS`; ``mean_blocks`` is the mean number of blocks run (``1..L``),
        ``fixed_accuracy`` the accuracy of exiting every question after ``round(mean_blocks)`` blocks.
    """
    gold = _check(readings, answers, styles)
    grid = tau_grid(readings.entropy) if taus is None else np.asarray(taus, dtype=np.float64)
    n = len(gold)
    rows = []
    for measure in MEASURES:
        correct = _correct(_scores(readings, styles, measure), gold)  # [N, L+1]
        for tau in grid:
            stop = exit_positions(readings.entropy, float(tau))
            hits = int(correct[np.arange(n), stop].sum())
            low, high = wilson_interval(hits, n, level)
            rows.append(
                {
                    "model": model,
                    "measure": measure,
                    "tau": float(tau),
                    "n": n,
                    "mean_blocks": float(stop.mean()),
                    "accuracy": hits / n,
                    "ci_low": low,
                    "ci_high": high,
                    "fixed_accuracy": float(correct[:, round(float(stop.mean()))].mean()),
                }
            )
    return pd.DataFrame(rows, columns=list(THRESHOLD_COLUMNS))
