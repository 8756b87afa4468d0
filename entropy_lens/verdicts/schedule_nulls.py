"""Planted null of "the expansion/pruning schedule survives a fitted lens": two lenses whose ΔH are unrelated across
blocks.

:func:`null_readings` writes held-out readings of one synthetic model under two lenses whose block profiles of ΔH
are drawn independently (each prompt shifting every block alike, each token adding noise; both lenses' KL far under
the bar, so every block counts); :func:`schedule_planted_rate` sends them through the same code path as a run
(:func:`~entropy_lens.analysis.schedule.schedule_table`,
:func:`~entropy_lens.analysis.schedule_agreement.agreement_table`, the claim's row rule and
:func:`~entropy_lens.verdicts.decision.beyond_null`) and counts the draws whose row shows the Spearman beyond its
block-permutation null (or, with ``holds``, also reads ``holds`` as stated). As stated alone
the rule answers for these blocks of this model: a Spearman between two unrelated profiles is rarely 0, and
questions narrow its interval around it; the permutation null is what breaks the blocks' pairing.
"""

from __future__ import annotations

import numpy as np

from entropy_lens.analysis.schedule import LOGIT, schedule_table
from entropy_lens.analysis.schedule_agreement import AGREEMENT_READING, agreement_table
from entropy_lens.verdicts import decision
from entropy_lens.verdicts.claims.schedule import SCHEDULE_RULE
from entropy_lens.verdicts.outcomes import CANNOT_BE_READ
from entropy_lens.verdicts.planted_nulls import SHOWN_WORDS
from entropy_lens.verdicts.rows import rows_of

# The synthetic model: its blocks (ΔH of blocks 1..L-1 all under the bar), tokens per prompt, and the spread of a
# prompt's shift and of a token's noise against the blocks' profile (sd 1).
NULL_BLOCKS = 10
TOKENS = 8
PROMPT_SD, TOKEN_SD = 0.3, 0.5
N_BOOT = 400


def null_readings(
    rng: np.random.Generator, n_prompts: int, n_blocks: int = NULL_BLOCKS, *, planted: float = 0.0
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], np.ndarray]:
    """Readings ``{lens: (kl, entropy)}`` of ``n_prompts`` prompts under the logit lens and a linear lens, and each
    token's prompt: the linear lens's ΔH profile is ``planted`` times the logit lens's plus an independent one
    (0: unrelated), each of sd 1 over blocks; every KL 0.1 nats (under the bar)."""
    n_layers = n_blocks + 1
    logit_profile = rng.normal(size=n_blocks)
    linear_profile = planted * logit_profile + np.sqrt(max(1 - planted**2, 0.0)) * rng.normal(size=n_blocks)
    prompts = np.repeat(np.arange(n_prompts), TOKENS)
    readings = {}
    for lens, profile in ((LOGIT, logit_profile), ("linear", linear_profile)):
        shift = rng.normal(scale=PROMPT_SD, size=(n_prompts, n_blocks))[prompts]
        delta = profile + shift + rng.normal(scale=TOKEN_SD, size=(len(prompts), n_blocks))
        entropy = 5.0 + np.concatenate([np.zeros((len(prompts), 1)), np.cumsum(delta, axis=1)], axis=1)
        readings[lens] = (np.full((len(prompts), n_layers), 0.1), entropy)
    return readings, prompts


def planted_row(readings: dict, prompts: np.ndarray, seed: int) -> dict:
    """The claim's paper-table row of one synthetic model's readings (the run's code path)."""
    schedule = schedule_table(readings, prompts, model="null", n_boot=N_BOOT, seed=seed)
    agreement = agreement_table(readings, prompts, schedule, model="null", n_boot=N_BOOT, seed=seed)
    (row,) = rows_of(AGREEMENT_READING.frame(agreement, "lens_schedule"), SCHEDULE_RULE)
    return row


def schedule_planted_rate(
    n_prompts: int, draws: int = 100, seed: int = 0, *, n_blocks: int = NULL_BLOCKS, holds: bool = False
) -> float:
    """Share of ``draws`` whose row shows the Spearman beyond its null (with ``holds``: and reads ``holds``) where
    the two lenses' ΔH are unrelated across blocks; a draw whose blocks hold no rising or no falling block of the
    logit lens's is drawn again (that row cannot be read)."""
    rng = np.random.default_rng(seed)
    shown = done = 0
    while done < draws:
        readings, prompts = null_readings(rng, max(n_prompts, 2), n_blocks)
        row = planted_row(readings, prompts, seed + done)
        if row["verdict"] == CANNOT_BE_READ:
            continue
        done += 1
        beyond = row["beyond_verdict"] in SHOWN_WORDS
        shown += beyond and (not holds or row["verdict"] == decision.EXTENSION_WORDS[decision.REPRODUCED])
    return shown / draws
