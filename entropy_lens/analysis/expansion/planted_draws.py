"""Planted nulls of the expansion rows on their own design: the Spearman on its own data, containment simulated.

docs/verdicts.md ("Planted nulls on the row's own design"): a row's planted null reads the row's own data with the
null's pairing in place of the observed one where the stored variables allow, else a simulation at the row's own
counts.

* **Spearman** (:func:`spearman_draws`).  The statistic needs only entropies and nucleus sizes, which the store
  holds for every prompt, so any pairing can be read: a draw reads a *second* cross-prompt pairing as "observed"
  (layer ``l`` of a prompt against layer ``l + 1`` of a prompt of another source) beside the row's own null
  pairing, through the row's own code (:func:`~entropy_lens.analysis.expansion.nulls.spearman_null`: the same
  cells, the same source-cluster bootstrap).  The second partner is drawn as extraction drew the recorded one
  (:func:`second_pairing`): within the prompt's batch (a cycle of the recorded partner map,
  :func:`entropy_lens.model.batching.partner_cycles`), by the same rule and a fresh generator
  (:func:`entropy_lens.model.batching.batch_partners`), so that the two pairings are two draws of one kind.
* **Containment, Jaccard** (:func:`overlap_draws`).  The store keeps the Jaccard with one partner only, so a second
  pairing's sets cannot be read: a draw simulates the row's design instead, with the row's own sources (each
  prompt's source, so its counts of sources and of prompts per source), token slots and layers.  Every layer's
  logits are drawn independently (standard normal over :data:`VOCAB` tokens, scaled by an inverse temperature
  per source and layer, so that entropy and nucleus size vary over depth as a source's prompts share a level),
  so consecutive layers share no candidates beyond chance; the top-p sets are the lens's
  (:func:`nucleus_members`, checked against :func:`entropy_lens.lens.metrics.row_metrics`), the partners are
  drawn in the row's own batches as extraction draws them, and the rows are the table's
  (:func:`~entropy_lens.analysis.expansion.nulls.overlap_null_rows`).

The draws stop as :func:`entropy_lens.core.draws.adaptive_draws` says, with the caller's decision (``shown``); the
verdicts judge every draw through the row's own rule (:mod:`entropy_lens.verdicts.nulls`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from entropy_lens.analysis.expansion import nulls
from entropy_lens.analysis.features import model_info, model_names, model_values, prompt_sources
from entropy_lens.core.draws import DrawSettings, Shown, adaptive_draws
from entropy_lens.model.batching import batch_partners, partner_cycles
from entropy_lens.store import schema

SPEARMAN = "spearman"
OWN_DATA = "the row's data, a second pairing of other-source partners read as observed"
SIMULATED = "simulated at the row's counts of sources, prompts, tokens and layers (one partner's sets are stored)"
# The simulation's vocabulary, nucleus mass and range of log inverse temperatures (entropies from near log V to
# well under one nat), as the planted stores of entropy_lens.analysis.expansion.planted.
VOCAB = 64
TOP_P = 0.6
LOG_SCALE = (-0.5, 1.5)
# The lens's tolerance on the nucleus mass (entropy_lens.lens.nucleus.MASS_TOL).
MASS_TOL = 1e-6
DRAW_COLUMNS = ("model", "family", "statistic", "design", "draw", "observed", *nulls.NULL_COLUMNS, "n_sources")


def recorded_batches(ds: xr.Dataset, model: str) -> list[np.ndarray]:
    """The batches of ``model``'s prompts as extraction dealt them: the cycles of its recorded partner map (before a
    same-source partner is removed), or the whole store as one batch without one."""
    partner = nulls.recorded_partners(ds, model)
    cycles = partner_cycles(partner) if (partner >= 0).any() else []
    return cycles or [np.arange(ds.sizes[schema.PROMPT])]


# Draws of a batch tried for a second pairing that shares no partner with the recorded one.
SHUFFLES = 20


def second_pairing(
    groups: Sequence[np.ndarray], sources: np.ndarray, rng: np.random.Generator, avoid: np.ndarray | None = None
) -> np.ndarray:
    """``[P]`` a second cross-prompt partner of each prompt (``-1``: none), drawn as extraction drew one.

    Within each batch of ``groups``, :func:`entropy_lens.model.batching.batch_partners` deals a fresh cycle of
    distinct partners of another source.  With ``avoid`` (``[P]`` the recorded partners), a batch is dealt again
    (up to :data:`SHUFFLES` times) until no prompt gets its recorded partner; a prompt that still does gets none,
    so that observed and null never read the same pair.
    """
    out = np.full(sources.size, -1, dtype=np.int64)
    for rows in groups:
        for _ in range(SHUFFLES):
            out[rows] = batch_partners(rows, sources[rows], rng)
            if avoid is None or not (out[rows] == avoid[rows]).any():
                break
    if avoid is not None:
        out[(out == avoid) & (out >= 0)] = -1
    return out


def spearman_draws(
    ds: xr.Dataset,
    *,
    n_boot: int,
    seed: int,
    shown: Shown | None = None,
    draws: DrawSettings | None = None,
    models: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Planted draws of each model's Spearman row on its own data (see the module docstring).

    Args:
        ds: The combined store the row reads.
        n_boot: The row's bootstrap replicates.
        seed: The row's bootstrap seed.
        shown: The decision on one draw, or ``None`` (``draws.min_draws`` draws).
        draws: How many (default :class:`~entropy_lens.core.draws.DrawSettings`).
        models: Models (default all).

    Returns:
        :data:`DRAW_COLUMNS`, one row per model and draw: ``observed`` the second pairing's Spearman, beside the
        row's null columns (``beyond`` = observed - null).
    """
    draws, sources = draws or DrawSettings(), prompt_sources(ds)
    out = []
    for index, model in enumerate(model_names(ds, models)):
        base = {**model_info(ds, model), "design": OWN_DATA, "n_sources": int(np.unique(sources).size)}
        rng = np.random.default_rng(draws.seed + index)
        draw = _spearman_draw(ds, model, sources, rng, n_boot=n_boot, seed=seed)
        out += [{**base, **row} for row in adaptive_draws(draw, shown, draws)]
    return pd.DataFrame(out, columns=list(DRAW_COLUMNS))


def _spearman_draw(
    ds: xr.Dataset,
    model: str,
    sources: np.ndarray,
    rng: np.random.Generator,
    *,
    n_boot: int,
    seed: int,
):
    """One model's Spearman draw by its index (see :func:`spearman_draws`)."""
    entropy = model_values(ds, model, schema.ENTROPY)
    nucleus = model_values(ds, model, schema.NUCLEUS_SIZE)
    partner, _, unpartnered = nulls.partners(ds, model)
    groups = recorded_batches(ds, model)

    def draw(_: int) -> list[dict[str, object]]:
        second = second_pairing(groups, sources, rng, avoid=partner)
        row = nulls.spearman_null(
            entropy,
            nucleus,
            partner,
            OWN_DATA,
            n_boot=n_boot,
            seed=seed,
            sources=sources,
            unpartnered=unpartnered,
            observed=second,
        )
        return [{"statistic": SPEARMAN, "observed": row["null_estimate"] + row["beyond"], **row}]

    return draw


def nucleus_members(logits: np.ndarray, top_p: float = TOP_P) -> np.ndarray:
    """``[R, V]`` bool top-p sets of ``[R, V]`` logits, as :func:`entropy_lens.lens.nucleus.nucleus_from_logp`
    finds them: the fewest most probable tokens (float32 probabilities, float64 running mass) whose mass reaches
    ``top_p`` less the lens's tolerance."""
    z = logits.astype(np.float32)
    z = z - z.max(axis=1, keepdims=True)
    probs = np.exp(z - np.log(np.exp(z.astype(np.float64)).sum(axis=1, keepdims=True)).astype(np.float32))
    order = np.argsort(-probs, axis=1, kind="stable")
    mass = np.cumsum(np.take_along_axis(probs, order, axis=1).astype(np.float64), axis=1)
    need = (mass < top_p - MASS_TOL).sum(axis=1) + 1
    members = np.zeros(probs.shape, dtype=bool)
    np.put_along_axis(members, order, np.arange(probs.shape[1])[None, :] < need[:, None], axis=1)
    return members


def _jaccard(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    union = (a | b).sum(axis=-1)
    return ((a & b).sum(axis=-1) / np.maximum(union, 1)).astype(np.float32)


def simulated_sets(
    rng: np.random.Generator, codes: np.ndarray, n_tokens: int, n_layers: int
) -> tuple[np.ndarray, np.ndarray]:
    """``([P, T, L] nucleus sizes, [P, T, L, V] top-p sets)`` of independent layers (see the module docstring);
    ``codes`` is the ``[P]`` source code of each prompt, whose prompts share their layers' temperatures."""
    scale = np.exp(rng.uniform(*LOG_SCALE, size=(int(codes.max()) + 1, n_layers)))[codes]  # [P, L]
    z = rng.standard_normal((codes.size, n_tokens, n_layers, VOCAB)) * scale[:, None, :, None]
    members = nucleus_members(z.reshape(-1, VOCAB)).reshape(z.shape)
    return members.sum(axis=-1).astype(np.int32), members


def overlap_draws(
    ds: xr.Dataset,
    *,
    n_boot: int,
    seed: int,
    shown: Shown | None = None,
    draws: DrawSettings | None = None,
    models: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Planted draws of each model's overlap rows, simulated at the row's counts (see the module docstring).

    Args:
        ds: The combined store the rows read (its sources, token slots, each model's layers and batches).
        n_boot: The rows' bootstrap replicates.
        seed: The rows' bootstrap seed.
        shown: The decision on one draw's row (each statistic has its own rate), or ``None``.
        draws: How many (default :class:`~entropy_lens.core.draws.DrawSettings`).
        models: Models (default all).

    Returns:
        :data:`DRAW_COLUMNS`, one row per model, statistic (Jaccard, containment, containment where the size
        changes) and draw.
    """
    draws, sources = draws or DrawSettings(), prompt_sources(ds)
    out = []
    for index, model in enumerate(model_names(ds, models)):
        info = model_info(ds, model)
        base = {**info, "design": SIMULATED, "n_sources": int(np.unique(sources).size)}
        rng = np.random.default_rng(draws.seed + index)
        shape = (ds.sizes[schema.TOKEN], int(info["n_layers"]))
        draw = _overlap_draw(recorded_batches(ds, model), sources, shape, rng, n_boot=n_boot, seed=seed)
        out += [{**base, **row} for row in adaptive_draws(draw, shown, draws)]
    return pd.DataFrame(out, columns=list(DRAW_COLUMNS))


def _overlap_draw(
    groups: Sequence[np.ndarray],
    sources: np.ndarray,
    shape: tuple[int, int],
    rng: np.random.Generator,
    *,
    n_boot: int,
    seed: int,
):
    """One model's overlap draw by its index (see :func:`overlap_draws`); ``shape`` its token slots and layers."""
    codes = nulls.source_codes(sources, sources.size)

    def draw(_: int) -> list[dict[str, object]]:
        size, members = simulated_sets(rng, codes, *shape)
        partner = second_pairing(groups, sources, rng)
        adjacent = np.full(size.shape, np.nan, dtype=np.float32)
        cross = np.full(size.shape, np.nan, dtype=np.float32)
        adjacent[..., :-1] = _jaccard(members[..., :-1, :], members[..., 1:, :])
        has = partner >= 0
        cross[has, :, :-1] = _jaccard(members[has, :, :-1, :], members[partner[has], :, 1:, :])
        rows = nulls.overlap_null_rows(
            adjacent, cross, size, partner, SIMULATED, n_boot=n_boot, seed=seed, sources=sources
        )
        return [
            {"statistic": name, "observed": row["null_estimate"] + row["beyond"], **row} for name, row in rows.items()
        ]

    return draw
