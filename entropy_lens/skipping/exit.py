"""The exit curve: where the MMLU answer forms, read through the logit lens and a fitted linear lens at every block.

Pure NumPy/pandas over :class:`~entropy_lens.skipping.readings.BlockReadings` (the answer letters'
log-probabilities and the lens entropy at the answer position of ``x_0 .. x_L``), per lens
(:func:`lens_readings`: the logit lens, and the linear lens where one is fitted):

* :func:`exit_curve`: per position ``p`` (the residual after ``p`` blocks; ``p = L`` is the model's own
  answer), the accuracy of reading the answer there (raw letter log-likelihood, and calibrated by the
  letter prior of the same position), the gold letter's log-probability among the four, and the mean
  lens entropy, beside which the expansion and pruning phases show;
* :func:`threshold_exit`: stop at the first block whose lens entropy falls below ``tau`` (the full
  model where none does): accuracy against the mean blocks used, over a grid of ``tau``, beside the
  accuracy of a fixed exit after as many blocks (rounded).  Each lens exits by its own entropy.

This is a lens read at earlier blocks, not a trained early-exit head: a low accuracy at a shallow block
may be the lens's bias as much as the answer not having formed.  The logit lens reads the first blocks
far from the model's own distribution, the linear lens (one affine translator per block, fitted to it)
much closer: where the two curves part, the logit lens's is the one to doubt.  The linear lens has no
translator for the embeddings, so its rows start at position 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from entropy_lens.answers.letters import calibrate
from entropy_lens.core.intervals import DEFAULT_LEVEL, wilson_interval
from entropy_lens.prompts.datasets import LETTERS
from entropy_lens.skipping.readings import BlockReadings

MEASURES = ("ll", "calibrated")
LOGIT, LINEAR = "logit", "linear"
LENSES = (LOGIT, LINEAR)
DEFAULT_TAUS = 24
EXIT_COLUMNS = (
    "model",
    "lens",
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
THRESHOLD_COLUMNS = (
    "model",
    "lens",
    "measure",
    "tau",
    "n",
    "mean_blocks",
    "accuracy",
    "ci_low",
    "ci_high",
    "fixed_accuracy",
)


@dataclass(frozen=True)
class LensReading:
    """One lens's reading of the answer position at ``x_0 .. x_L``.

    Attributes:
        lens: One of :data:`LENSES`.
        entropy: ``[N, L+1]`` lens entropy (nats).
        letters: ``[N, L+1, C]`` the letters' log-probabilities over the whole vocabulary.
        first: The first position the lens reads; the positions before it hold no reading.
    """

    lens: str
    entropy: np.ndarray
    letters: np.ndarray
    first: int


def lens_readings(readings: BlockReadings) -> tuple[LensReading, ...]:
    """The logit lens from position 0; the linear lens from position 1 where its entropy and letters were both
    recorded (a record without its letters, written before they were, reads the logit lens alone)."""
    out = [LensReading(LOGIT, readings.entropy, readings.letters, 0)]
    if readings.entropy_linear is not None and readings.letters_linear is not None:
        out.append(LensReading(LINEAR, readings.entropy_linear, readings.letters_linear, 1))
    return tuple(out)


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


def _correct(reading: LensReading, styles: Sequence[str], measure: str, gold: np.ndarray) -> np.ndarray:
    """``[N, L+1]`` whether the argmax letter at each position is the gold one under ``measure`` (raw, or
    calibrated by the same position's letter prior); False before the lens's first position."""
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}, got {measure!r}")
    correct = np.zeros(reading.entropy.shape, dtype=bool)
    for p in range(reading.first, correct.shape[1]):
        scores = reading.letters[:, p] if measure == "ll" else calibrate(reading.letters[:, p], styles)
        correct[:, p] = scores.argmax(axis=1) == gold
    return correct


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
    """Per lens, measure and position: the answer read there (:data:`EXIT_COLUMNS`).

    Positions run ``0..L`` through the logit lens and ``1..L`` through the linear lens (where fitted).
    ``gold_logprob`` is the gold letter's log-probability among the four raw letter scores (nats),
    the same at both measures; ``entropy`` the mean lens entropy (nats).
    """
    gold = _check(readings, answers, styles)
    rows = [row for reading in lens_readings(readings) for row in _curve_rows(reading, gold, styles, model, level)]
    return pd.DataFrame(rows, columns=list(EXIT_COLUMNS))


def _curve_rows(reading: LensReading, gold: np.ndarray, styles: Sequence[str], model: str, level: float) -> list[dict]:
    n, positions = reading.entropy.shape
    read = reading.letters[:, reading.first :]  # [N, P, C]: the positions the lens reads
    raw = read - np.logaddexp.reduce(read, axis=2, keepdims=True)  # among the four letters
    gold_logp = np.take_along_axis(raw, gold[:, None, None], axis=2)[:, :, 0].mean(axis=0)  # [P]
    rows = []
    for measure in MEASURES:
        correct = _correct(reading, styles, measure, gold)
        for p in range(reading.first, positions):
            hits = int(correct[:, p].sum())
            low, high = wilson_interval(hits, n, level)
            rows.append(
                {
                    "model": model,
                    "lens": reading.lens,
                    "measure": measure,
                    "position": p,
                    "depth": p / (positions - 1),
                    "n": n,
                    "accuracy": hits / n,
                    "ci_low": low,
                    "ci_high": high,
                    "gold_logprob": float(gold_logp[p - reading.first]),
                    "entropy": float(reading.entropy[:, p].mean()),
                }
            )
    return rows


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
    """Per lens, measure and ``tau``: accuracy of exiting at the first block whose entropy under that lens falls
    below ``tau``, the answer read there through the same lens.

    Args:
        taus: Thresholds in nats, the same for every lens; by default each lens's own :func:`tau_grid`.

    Returns:
        :data:`THRESHOLD_COLUMNS`; ``mean_blocks`` is the mean number of blocks run (``1..L``),
        ``fixed_accuracy`` the accuracy of exiting every question after ``round(mean_blocks)`` blocks.
    """
    gold = _check(readings, answers, styles)
    rows = []
    for reading in lens_readings(readings):
        grid = tau_grid(reading.entropy) if taus is None else np.asarray(taus, dtype=np.float64)
        for measure in MEASURES:
            correct = _correct(reading, styles, measure, gold)  # [N, L+1]
            for tau in grid:
                exit_at = _exit_at(reading.entropy, correct, float(tau), level)
                rows.append({"model": model, "lens": reading.lens, "measure": measure, **exit_at})
    return pd.DataFrame(rows, columns=list(THRESHOLD_COLUMNS))


def _exit_at(entropy: np.ndarray, correct: np.ndarray, tau: float, level: float) -> dict[str, float]:
    """One threshold's exit: ``[N, L+1]`` ``entropy`` decides where each question stops, ``correct`` what it answers."""
    stop = exit_positions(entropy, tau)  # 1..L: every lens reads there
    n = len(stop)
    hits = int(correct[np.arange(n), stop].sum())
    low, high = wilson_interval(hits, n, level)
    return {
        "tau": tau,
        "n": n,
        "mean_blocks": float(stop.mean()),
        "accuracy": hits / n,
        "ci_low": low,
        "ci_high": high,
        "fixed_accuracy": float(correct[:, round(float(stop.mean()))].mean()),
    }
