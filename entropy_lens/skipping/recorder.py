"""Recording :class:`~entropy_lens.skipping.readings.BlockReadings` from the layer-skip sweep's intact pass (torch).

:class:`ReadingRecorder` is the ``observe`` hook of
:func:`~entropy_lens.skipping.evaluation.condition_letter_logprobs`: per batch it reads the kept input of
every block (and reruns the last block for its output: one block per batch), the block-to-block token
cosines, the last token's pairwise angles, the hidden states' bucket entropy (:func:`bucket_entropy`)
and the head's reading at every position (through the logit lens and, where fitted, the linear lens).  What
each array means is in :mod:`entropy_lens.skipping.readings`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import torch

from entropy_lens.lens.decoding import gather_logprobs, lens_logits
from entropy_lens.lens.entropy import shannon_entropy
from entropy_lens.lens.translators import Translators
from entropy_lens.model.hooks import BlockCall, run_blocks
from entropy_lens.model.lens_model import LensModel
from entropy_lens.prompts.datasets import LETTERS
from entropy_lens.skipping.readings import HIDDEN_BINS, BlockReadings


class ReadingRecorder:
    """Collects :class:`BlockReadings` from the shared-prefix pass, one batch at a time.

    Pass it as ``observe`` to :func:`~entropy_lens.skipping.evaluation.condition_letter_logprobs`;
    :meth:`result` returns the record once every prompt was seen.
    """

    def __init__(
        self, lm: LensModel, n_prompts: int, n_choices: int = len(LETTERS), translators: Translators | None = None
    ) -> None:
        if n_prompts < 1:
            raise ValueError(f"n_prompts must be >= 1, got {n_prompts}; record at least one prompt")
        if translators is not None:
            translators.check_model(lm)
        n, positions = n_prompts, lm.n_layers + 1
        self._lm, self._translators = lm, translators
        self._linear = np.full((n, positions), np.nan) if translators is not None else None
        self._letters_linear = np.full((n, positions, n_choices), np.nan) if translators is not None else None
        self._seen = np.zeros(n, dtype=bool)
        self._token_cos = np.full((n, lm.n_layers), np.nan)
        self._angle = np.full((n, positions, positions), np.nan)
        self._entropy = np.full((n, positions), np.nan)
        self._letters = np.full((n, positions, n_choices), np.nan)
        self._hidden = np.full((n, positions), np.nan)

    @torch.inference_mode()
    def __call__(
        self, rows: Sequence[int], mask: torch.Tensor, calls: dict[int, BlockCall], ids: Sequence[Sequence[int]]
    ) -> None:
        """Read one batch: ``rows`` its prompts' indices, ``mask`` ``[B, S]`` its attention mask, ``calls``
        the recorded block calls (every block's input kept), ``ids`` ``[B][C]`` the letters' token ids."""
        lm = self._lm
        missing = [i for i in range(lm.n_layers) if i not in calls or calls[i].hidden is None]
        if missing:
            raise ValueError(f"the inputs of blocks {missing} were not kept; capture every block's input")
        states = [calls[i].hidden for i in range(lm.n_layers)]
        states.append(run_blocks(lm, calls, lm.n_layers - 1))  # x_L: the last block's output
        index = np.asarray(rows)
        self._token_cos[index] = token_cosines(states, mask).cpu().numpy()
        self._hidden[index] = torch.stack([bucket_entropy(s, mask) for s in states], dim=1).cpu().numpy()
        last = torch.stack([s[:, -1, :] for s in states], dim=1)  # [B, L+1, d]
        self._angle[index] = pairwise_angles(last).cpu().numpy()
        self._entropy[index], self._letters[index] = head_reading(lm, last, ids)
        if self._translators is not None:
            mapped = self._translators.apply(last[:, 1:, :])  # [B, L, d]: block l's output through its translator
            self._linear[index, 1:], self._letters_linear[index, 1:] = head_reading(lm, mapped, ids)
        self._seen[index] = True

    def result(self, questions: Sequence[str]) -> BlockReadings:
        """The record, with ``questions`` naming its rows.

        Raises:
            ValueError: when a prompt was never seen or the question ids do not match the prompts.
        """
        if len(questions) != self._seen.size:
            raise ValueError(f"got {len(questions)} question ids for {self._seen.size} recorded prompts")
        if not self._seen.all():
            raise ValueError(f"prompts {np.flatnonzero(~self._seen).tolist()} were never recorded; run the pass first")
        return BlockReadings(
            tuple(str(q) for q in questions),
            self._token_cos,
            self._angle,
            self._entropy,
            self._letters,
            self._linear,
            self._letters_linear,
            self._hidden,
        )


def head_reading(lm: LensModel, resid: torch.Tensor, ids: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """``[B, P]`` Shannon entropy (nats) and ``[B, P, C]`` letter log-probabilities of ``[B, P, d]`` residuals
    read through the model's head, both from one product (``ids`` ``[B][C]`` each prompt's letter token ids)."""
    batch, positions = resid.shape[:2]
    logits = lens_logits(lm, resid.reshape(batch * positions, -1))  # [B P, V]: one product, not P
    entropy = shannon_entropy(logits).reshape(batch, positions).cpu().numpy()
    letters = gather_logprobs(logits, np.repeat(np.asarray(ids), positions, axis=0))  # [B P, C]
    return entropy, letters.reshape(batch, positions, -1)


def token_cosines(states: Sequence[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
    """``[B, L]`` mean over each prompt's unmasked tokens of ``cos(x_i, x_{i+1})`` of ``L+1`` ``[B, S, d]`` states."""
    weights = mask.to(torch.float32)  # [B, S]
    out = []
    for before, after in itertools.pairwise(states):
        cos = torch.nn.functional.cosine_similarity(before.float(), after.float(), dim=-1)  # [B, S]
        out.append((cos * weights).sum(-1) / weights.sum(-1))
    return torch.stack(out, dim=1)


def bucket_entropy(states: torch.Tensor, mask: torch.Tensor, bins: int = HIDDEN_BINS) -> torch.Tensor:
    """``[B]`` EntroDrop's bucket estimate of the entropy of each prompt's hidden states ``[B, S, d]`` (nats).

    Per prompt and hidden dimension, its unmasked tokens' values (``mask`` ``[B, S]``) fall into ``bins``
    equal-width buckets between that dimension's minimum and maximum over those tokens (the maximum in the last
    bucket; a constant dimension in one bucket); the entropy of the bucket shares (``0 log 0 = 0``) is summed
    over the dimensions.
    """
    real = mask.to(torch.bool)[:, :, None]  # [B, S, 1]
    x = states.float()
    low = torch.where(real, x, torch.inf).amin(dim=1, keepdim=True)  # [B, 1, d]
    high = torch.where(real, x, -torch.inf).amax(dim=1, keepdim=True)
    width = (high - low).clamp_min(torch.finfo(torch.float32).tiny)
    bucket = ((x - low) / width * bins).floor().clamp(0, bins - 1).long()  # [B, S, d]
    batch, _, d = x.shape
    slot = bucket + torch.arange(d, device=x.device) * bins  # [B, S, d]: dimension j's buckets at j*bins ..
    counts = torch.zeros(batch, d * bins, device=x.device)
    counts.scatter_add_(1, slot.reshape(batch, -1), real.expand_as(x).reshape(batch, -1).float())
    share = counts / mask.to(torch.float32).sum(dim=1, keepdim=True)  # [B, d * bins]
    return -torch.special.xlogy(share, share).sum(dim=1)


def pairwise_angles(last: torch.Tensor) -> torch.Tensor:
    """``[B, P, P]`` ``arccos(cos(x_a, x_b)) / pi`` between every pair of ``[B, P, d]`` vectors (0..1).

    Computed as ``2 atan2(|u - v|, |u + v|)`` of the unit vectors, which stays exact near 0 where
    ``arccos`` of a rounded cosine does not (a vector with itself reads 0, not 1e-4).
    """
    unit = torch.nn.functional.normalize(last.float().double(), dim=-1)  # [B, P, d]
    diff = torch.cdist(unit, unit)  # |u - v|
    total = torch.sqrt((4.0 - diff**2).clamp_min(0.0))  # |u + v| of unit vectors
    return (2.0 * torch.atan2(diff, total) / math.pi).float()
