"""What the intact pass of the layer-skip sweep shows at every block: the raw material of the pruning criteria.

The shared-prefix pass (:func:`entropy_lens.skipping.evaluation.condition_letter_logprobs`) keeps the
residual input of every block to rerun the model from it.  :class:`~entropy_lens.skipping.recorder.ReadingRecorder`
reads those inputs, batch by batch, before they are dropped, and keeps per question a :class:`BlockReadings`:

* ``token_cos`` ``[N, L]``: the mean over the prompt's tokens (padding left out) of
  ``cos(x_i, x_{i+1})``, ``x_i`` the input of block ``i`` and ``x_L`` the last block's output
  (before the final norm): Block Influence (ShortGPT, Men et al. 2024) is ``1 - `` its mean;
* ``angle`` ``[N, L+1, L+1]``: ``arccos(cos(x_a, x_b)) / pi`` at the last token (the answer
  position), every pair: the angular distance of Gromov et al. (2024) for any span ``n = b - a``;
* ``entropy`` ``[N, L+1]``: the logit lens's Shannon entropy (nats) at the answer position of
  ``x_0 .. x_L`` (``x_0`` the embeddings, ``x_L`` the model's own final distribution);
* ``letters`` ``[N, L+1, C]``: the answer letters' log-probabilities (over the whole vocabulary)
  under the same lens, for the exit curve;
* ``entropy_linear`` ``[N, L+1]`` where a linear lens is fitted: the same entropy read through it
  (position 0, the embeddings, has no translator: NaN), so the ΔH criterion is read beside the logit
  lens's, which reads the first blocks far from the model's own distribution;
* ``letters_linear`` ``[N, L+1, C]`` where a linear lens is fitted: the letters' log-probabilities
  through it (NaN at position 0), so the exit curve is read through both lenses; from the same logits
  as ``entropy_linear``;
* ``hidden_entropy`` ``[N, L+1]``: the entropy of the hidden states themselves (not of a lens's
  distribution), EntroDrop's (Yang et al. 2025) bucket estimate over the prompt's tokens: per hidden
  dimension, the tokens' values binned into :data:`HIDDEN_BINS` equal-width buckets between that
  dimension's minimum and maximum, the Shannon entropy of the bucket shares (nats), summed over the
  dimensions (:func:`entropy_lens.skipping.recorder.bucket_entropy`).

This module is the record and its tables, NumPy and pandas only (the table and figure jobs read it
without torch): :func:`readings_frames` turns the record into two tidy tables (the per-position
readings, the pairwise angles) for a workflow job to write, :func:`frames_readings` reads them back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from entropy_lens.prompts.datasets import LETTERS

READING_COLUMNS = ("question", "position", "entropy", *(f"logprob_{c}" for c in LETTERS), "token_cos")
# Written beside READING_COLUMNS (NaN where no linear lens was fitted); a table without them reads as none.
LINEAR_COLUMN = "entropy_linear"
LINEAR_LETTER_COLUMNS = tuple(f"logprob_linear_{c}" for c in LETTERS)
LINEAR_COLUMNS = (LINEAR_COLUMN, *LINEAR_LETTER_COLUMNS)
ANGLE_COLUMNS = ("question", "start", "end", "angle")
# Written beside READING_COLUMNS (NaN where not recorded); a table without it reads as none.
HIDDEN_COLUMN = "hidden_entropy"
# Buckets per hidden dimension of the hidden states' entropy (EntroDrop's bucket estimator).
HIDDEN_BINS = 20


@dataclass(frozen=True)
class BlockReadings:
    """Per question, what the intact model shows at every block (see the module docstring for each array)."""

    questions: tuple[str, ...]
    token_cos: np.ndarray  # [N, L]
    angle: np.ndarray  # [N, L+1, L+1]
    entropy: np.ndarray  # [N, L+1]
    letters: np.ndarray  # [N, L+1, C]
    entropy_linear: np.ndarray | None = None  # [N, L+1], NaN at 0; None without a linear lens
    letters_linear: np.ndarray | None = None  # [N, L+1, C], NaN at 0; None without a linear lens
    hidden_entropy: np.ndarray | None = None  # [N, L+1], nats; None where not recorded

    @property
    def n_layers(self) -> int:
        return int(self.token_cos.shape[1])


def readings_frames(readings: BlockReadings) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two tidy tables of a record: :data:`READING_COLUMNS` (one row per question and position ``0..L``;
    ``token_cos`` of the block whose input the position is, NaN at ``L``) and :data:`ANGLE_COLUMNS`
    (one row per question and pair ``start < end``); beside the first, :data:`LINEAR_COLUMNS` (NaN without a
    linear lens) and :data:`HIDDEN_COLUMN`."""
    n, positions = readings.entropy.shape
    token_cos = np.concatenate([readings.token_cos, np.full((n, 1), np.nan)], axis=1)
    linear = np.full((n, positions), np.nan) if readings.entropy_linear is None else readings.entropy_linear
    shape = (n, positions, len(LETTERS))
    letters_linear = np.full(shape, np.nan) if readings.letters_linear is None else readings.letters_linear
    hidden = np.full((n, positions), np.nan) if readings.hidden_entropy is None else readings.hidden_entropy
    frame = pd.DataFrame(
        {
            "question": np.repeat(readings.questions, positions),
            "position": np.tile(np.arange(positions), n),
            "entropy": readings.entropy.ravel(),
            **{f"logprob_{c}": readings.letters[:, :, i].ravel() for i, c in enumerate(LETTERS)},
            "token_cos": token_cos.ravel(),
            LINEAR_COLUMN: linear.ravel(),
            **{column: letters_linear[:, :, i].ravel() for i, column in enumerate(LINEAR_LETTER_COLUMNS)},
            HIDDEN_COLUMN: hidden.ravel(),
        }
    )
    start, end = np.triu_indices(positions, k=1)
    angles = pd.DataFrame(
        {
            "question": np.repeat(readings.questions, start.size),
            "start": np.tile(start, n),
            "end": np.tile(end, n),
            "angle": readings.angle[:, start, end].ravel(),
        }
    )
    return frame[[*READING_COLUMNS, *LINEAR_COLUMNS, HIDDEN_COLUMN]], angles[list(ANGLE_COLUMNS)]


def frames_readings(frame: pd.DataFrame, angles: pd.DataFrame) -> BlockReadings:
    """The :class:`BlockReadings` back from :func:`readings_frames`'s tables.

    The linear lens's entropy and letters, and the hidden states' entropy, each read as ``None`` where their
    columns are absent (a table written before they were) or hold no value (no linear lens fitted).

    Raises:
        ValueError: for a table without its columns or a question without every position.
    """
    for table, columns, what in ((frame, READING_COLUMNS, "readings"), (angles, ANGLE_COLUMNS, "angles")):
        absent = [c for c in columns if c not in table]
        if absent:
            raise ValueError(f"{what} table lacks columns {absent}; write it with readings_frames")
    questions = tuple(dict.fromkeys(frame["question"].astype(str)))
    positions = int(frame["position"].max()) + 1
    if len(frame) != len(questions) * positions:
        raise ValueError(f"readings table has {len(frame)} rows for {len(questions)} questions x {positions} positions")
    ordered = frame.assign(question=frame["question"].astype(str)).set_index(["question", "position"])
    ordered = ordered.loc[pd.MultiIndex.from_product([questions, range(positions)])]
    shape = (len(questions), positions)
    angle = np.zeros((len(questions), positions, positions))
    row = {q: i for i, q in enumerate(questions)}
    qi = angles["question"].astype(str).map(row).to_numpy()
    a, b, value = angles["start"].to_numpy(int), angles["end"].to_numpy(int), angles["angle"].to_numpy(float)
    angle[qi, a, b] = value
    angle[qi, b, a] = value
    linear = _present(ordered, [LINEAR_COLUMN], shape)
    hidden = _present(ordered, [HIDDEN_COLUMN], shape)
    return BlockReadings(
        questions,
        ordered["token_cos"].to_numpy(float).reshape(shape)[:, :-1],
        angle,
        ordered["entropy"].to_numpy(float).reshape(shape),
        _stacked(ordered, [f"logprob_{c}" for c in LETTERS], shape),
        None if linear is None else linear[:, :, 0],
        _present(ordered, LINEAR_LETTER_COLUMNS, shape),
        None if hidden is None else hidden[:, :, 0],
    )


def _stacked(ordered: pd.DataFrame, columns: Sequence[str], shape: tuple[int, int]) -> np.ndarray:
    """``[N, P, K]`` of ``K`` columns of a table ordered by question and position (``shape`` ``(N, P)``)."""
    return np.stack([ordered[c].to_numpy(float).reshape(shape) for c in columns], axis=-1)


def _present(ordered: pd.DataFrame, columns: Sequence[str], shape: tuple[int, int]) -> np.ndarray | None:
    """:func:`_stacked`, or ``None`` where a column is absent or every value is NaN."""
    if any(c not in ordered for c in columns):
        return None
    values = _stacked(ordered, columns, shape)
    return values if np.isfinite(values).any() else None
