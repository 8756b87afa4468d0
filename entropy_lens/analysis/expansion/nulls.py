"""Cross-prompt nulls of the expansion claims: the same statistic with layer ``l + 1`` taken from another prompt.

Both expansion statistics compare layer ``l`` of a prompt with layer ``l + 1`` of the same
prompt.  Their null keeps everything mechanical (the model, the dataset, the layer pair, the
token slot, how entropy and nucleus size move together within one distribution) and breaks
the one thing the claims assert, that layer ``l + 1`` continues layer ``l``'s shortlist: layer
``l`` of prompt ``i`` is paired with layer ``l + 1`` of its partner ``pi(i)``, a fixed derangement
of the prompts of one model and dataset, each prompt's partner a prompt of *another source* (story, topic,
question: docs/verdicts.md, "The right units"), so that the null shares no content with the prompt.

* ``Delta H`` vs ``Delta N`` Spearman: ``Delta H' = H_pi(i)(l+1) - H_i(l)`` and ``Delta N'``
  likewise.  Within one distribution entropy and nucleus size rank together, so this null
  reaches the study's bar on its own: the Spearman is mechanical.
* Adjacent-layer overlap (Jaccard, containment): the top-p set of layer ``l`` of ``i`` against
  that of layer ``l + 1`` of ``pi(i)``.  The sets are not in the store; extraction computes this
  overlap (``nucleus_jaccard_cross``) against the partner it records (coordinate ``partner``:
  :func:`entropy_lens.model.batching.batch_partners`), and containment follows from the Jaccard
  and the two sizes exactly as for adjacent layers.

The partner is the one recorded at extraction; a store extracted without it (no ``partner``
coordinate) gives the Spearman's null with partners drawn by extraction's rule over the whole store,
and no overlap null.  A recorded partner of the prompt's own source (a store extracted before partners
were drawn from other sources) is not used: the prompt has no partner, and the row counts it
(``null_unpartnered``).  Blank prompts share one context (the empty prompt), so their partner is
another sample.  Observed and null are computed on the same cells (valid on both sides: the
prompt's two layers and the partner's next layer at the same token slot), and ``beyond`` =
observed - null has a paired source-cluster bootstrap interval: each replicate draws sources
with replacement and recomputes both sides on their prompts (:func:`entropy_lens.core.intervals.cluster_sums`).
"""

from __future__ import annotations

import logging
import math

import numpy as np
import xarray as xr
from scipy import stats

from entropy_lens.analysis.features import model_values, prompt_sources, source_coordinate
from entropy_lens.core.frames import NULL_CONTRACT
from entropy_lens.core.intervals import cluster_sums, expanded_percentile_interval
from entropy_lens.model.batching import batch_partners
from entropy_lens.store import schema

log = logging.getLogger(__name__)

JACCARD, CONTAINMENT, CONTAINMENT_SIZE_CHANGES = "jaccard", "containment", "containment_size_changes"
# Containment derived from a float32 Jaccard is off by ~1e-7; beyond this the Jaccard and sizes disagree.
CONTAINMENT_TOLERANCE = 1e-5
NULL_COLUMNS = (
    *NULL_CONTRACT,
    "null_n",
    "null_unpartnered",
)
CROSS = schema.NUCLEUS_JACCARD_CROSS
RECORDED = "cross-prompt (layer l of a prompt vs layer l+1 of its batch partner of another source)"
# Blank prompts are one context (the empty prompt): each sample is its own source, its partner another sample.
RECORDED_SAMPLE = "cross-prompt (layer l of a blank sample vs layer l+1 of another sample: one shared context)"
NEXT_IN_STORE = "cross-prompt (layer l of a prompt vs layer l+1 of a prompt of another source in the store)"


def partners(ds: xr.Dataset, model: str) -> tuple[np.ndarray, str, int]:
    """``[P]`` partner index of each prompt of ``model`` (``-1``: none), the null's name and the prompts without one.

    The partner recorded at extraction (coordinate ``partner``) when the store has one for ``model``, else
    the rule of extraction over the whole store as one batch
    (:func:`entropy_lens.model.batching.batch_partners`); either way a partner of the prompt's own source
    (:func:`~entropy_lens.analysis.features.prompt_sources`) is removed (:func:`other_source`).
    """
    n = ds.sizes[schema.PROMPT]
    sources = prompt_sources(ds)
    index, name = recorded_partners(ds, model), RECORDED
    if not (index >= 0).any():
        # no partner recorded for this model (a store extracted before the null, combined with newer ones)
        index, name = batch_partners(np.arange(n), sources), NEXT_IN_STORE
    index, unpartnered = other_source(index, sources)
    return index, null_name(ds, name), unpartnered


def recorded_partners(ds: xr.Dataset, model: str) -> np.ndarray:
    """``[P]`` the partner extraction recorded for each prompt of ``model`` (coordinate ``partner``), ``-1`` where
    none (and everywhere for a store without the coordinate)."""
    if schema.PARTNER not in ds.coords:
        return np.full(ds.sizes[schema.PROMPT], -1, dtype=np.int64)
    ids = ds[schema.PARTNER]
    ids = ids.sel({schema.MODEL: model}) if schema.MODEL in ids.dims else ids
    return ds.indexes[schema.PROMPT].get_indexer([str(p) for p in ids.values]).astype(np.int64)


def other_source(partner: np.ndarray, sources: np.ndarray) -> tuple[np.ndarray, int]:
    """``partner`` with every partner of the prompt's own source removed (``-1``), and the prompts left without one.

    Args:
        partner: ``[P]`` partner index of each prompt (``-1``: none).
        sources: ``[P]`` source of each prompt.

    Returns:
        ``([P] partner, n_unpartnered)``.
    """
    sources = np.asarray(sources)
    if partner.shape != sources.shape:
        raise ValueError(f"partner and sources must hold one value per prompt, got {partner.shape}, {sources.shape}")
    out = partner.copy()
    has = out >= 0
    out[has & (sources[np.where(has, out, 0)] == sources)] = -1
    return out, int((out < 0).sum())


def null_name(ds: xr.Dataset, recorded: str) -> str:
    """The null's name on ``ds``: a blank store's partner is another sample of one shared context."""
    if recorded == RECORDED and source_coordinate(ds) == schema.PROMPT and ds.attrs.get("dataset") == "blank":
        return RECORDED_SAMPLE
    return recorded


def source_codes(sources: np.ndarray | None, n_prompts: int) -> np.ndarray:
    """``[P]`` integer code of each prompt's source (each prompt its own without ``sources``)."""
    if sources is None:
        return np.arange(n_prompts)
    sources = np.asarray(sources)
    if sources.shape != (n_prompts,):
        raise ValueError(f"sources must hold one source per prompt ({n_prompts}), got shape {sources.shape}")
    return np.unique(sources.astype(str), return_inverse=True)[1]


def of_partner(cells: np.ndarray, partner: np.ndarray) -> np.ndarray:
    """``[P, T, L]`` float64 ``cells`` of each prompt's partner (NaN for a prompt without one)."""
    out = np.full(cells.shape, np.nan)
    has = partner >= 0
    out[has] = cells[partner[has]]
    return out


def sizes(nucleus: np.ndarray) -> np.ndarray:
    """Nucleus sizes as float64 with masked slots (``<= 0``) NaN."""
    return np.where(nucleus > 0, nucleus, np.nan).astype(np.float64)


def cross_deltas(
    entropy: np.ndarray,
    nucleus: np.ndarray,
    partner: np.ndarray,
    *,
    log_nucleus: bool = False,
    observed: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Observed and cross-prompt ``(Delta H, Delta N)`` on the cells valid for both.

    Args:
        entropy: ``[P, T, L]`` entropy (NaN where masked).
        nucleus: ``[P, T, L]`` nucleus sizes (``<= 0`` where masked).
        partner: ``[P]`` partner index of each prompt (``-1``: none).
        log_nucleus: Changes of ``log N`` instead of ``N``.
        observed: ``[P]`` the prompt whose layer ``l + 1`` the *observed* change reads (``-1``: none); default
            the prompt itself.  A planted null reads a second cross-prompt pairing here
            (:func:`spearman_planted_draws`).

    Returns:
        ``(d_h, d_n, d_h_null, d_n_null, prompt)``: ``[n]`` arrays over the cells ``(i, t, l)``
        where ``H`` and ``N`` are finite at layers ``l`` and ``l + 1`` of ``i`` and at layer
        ``l + 1`` of ``pi(i)``; ``prompt`` is ``i``.
    """
    if entropy.shape != nucleus.shape or entropy.ndim != 3 or partner.shape != entropy.shape[:1]:
        raise ValueError(
            f"entropy and nucleus must share a [P, T, L] shape and partner be [P]; got "
            f"{entropy.shape}, {nucleus.shape}, {partner.shape}"
        )
    h, n = entropy.astype(np.float64), sizes(nucleus)
    n = np.log(n) if log_nucleus else n
    h_other, n_other = of_partner(h, partner), of_partner(n, partner)
    h_next, n_next = (h, n) if observed is None else (of_partner(h, observed), of_partner(n, observed))
    d = (h_next[..., 1:] - h[..., :-1], n_next[..., 1:] - n[..., :-1])
    d_null = (h_other[..., 1:] - h[..., :-1], n_other[..., 1:] - n[..., :-1])
    ok = np.logical_and.reduce([np.isfinite(x) for x in (*d, *d_null)])
    prompt = np.broadcast_to(np.arange(h.shape[0])[:, None, None], ok.shape)
    return d[0][ok], d[1][ok], d_null[0][ok], d_null[1][ok], prompt[ok]


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(stats.spearmanr(x, y).statistic)


def _correlations(sums: np.ndarray) -> np.ndarray:
    """``[B]`` Pearson correlations from replicate sums ``n, sx, sy, sxx, syy, sxy`` (``[6, B]``)."""
    n, sx, sy, sxx, syy, sxy = sums
    with np.errstate(invalid="ignore", divide="ignore"):
        return (sxy - sx * sy / n) / np.sqrt((sxx - sx * sx / n) * (syy - sy * sy / n))


def null_row(
    name: str,
    observed: float,
    null: float,
    null_draws,
    beyond_draws,
    n: int,
    n_units: int = 0,
    unpartnered: int = 0,
) -> dict[str, object]:
    """The contract's null columns (:data:`NULL_COLUMNS`) of one row; ``n`` cells, ``n_units`` sources resampled,
    ``unpartnered`` prompts without a partner of another source."""
    null_draws = np.full(0, np.nan) if null_draws is None else null_draws
    beyond_draws = np.full(0, np.nan) if beyond_draws is None else beyond_draws
    null_low, null_high = expanded_percentile_interval(null_draws, n_units)
    beyond_low, beyond_high = expanded_percentile_interval(beyond_draws, n_units)
    return {
        "null_name": name,
        "null_estimate": null,
        "null_low": null_low,
        "null_high": null_high,
        "beyond": observed - null,
        "beyond_low": beyond_low,
        "beyond_high": beyond_high,
        "null_n": n,
        "null_unpartnered": unpartnered,
    }


def spearman_null(
    entropy: np.ndarray,
    nucleus: np.ndarray,
    partner: np.ndarray,
    name: str,
    *,
    log_nucleus: bool = False,
    n_boot: int,
    seed: int,
    sources: np.ndarray | None = None,
    unpartnered: int = 0,
    observed: np.ndarray | None = None,
) -> dict[str, object]:
    """The cross-prompt null of the ``Delta H`` vs ``Delta N`` Spearman, with ``beyond`` paired over sources.

    Observed and null are Spearman correlations over the same cells (:func:`cross_deltas`);
    each bootstrap replicate draws sources (``sources``: ``[P]`` the source of each prompt; each prompt its
    own by default) and recomputes the correlation of the full sample's ranks on both sides (as
    :func:`entropy_lens.core.intervals.cluster_bootstrap_correlation`).

    ``observed``: the second pairing a planted null reads as observed (:func:`cross_deltas`).

    Returns:
        The :data:`NULL_COLUMNS` of the row (``unpartnered`` copied into ``null_unpartnered``).
    """
    d_h, d_n, d_h0, d_n0, prompt = cross_deltas(entropy, nucleus, partner, log_nucleus=log_nucleus, observed=observed)
    source = source_codes(sources, entropy.shape[0])[prompt]
    observed, null = _spearman(d_h, d_n), _spearman(d_h0, d_n0)
    if math.isnan(observed) or math.isnan(null):
        return null_row(name, observed, null, None, None, int(d_h.size), unpartnered=unpartnered)
    ranks = [stats.rankdata(v) for v in (d_h, d_n, d_h0, d_n0)]
    x, y, x0, y0 = (r - r.mean() for r in ranks)  # centring keeps the sums well conditioned
    one = np.ones_like(x)
    sums = cluster_sums(
        (one, x, y, x * x, y * y, x * y, one, x0, y0, x0 * x0, y0 * y0, x0 * y0), source, n_boot=n_boot, seed=seed
    )
    if sums is None:
        return null_row(name, observed, null, None, None, int(d_h.size), unpartnered=unpartnered)
    r_obs, r_null = _correlations(sums[:6]), _correlations(sums[6:])
    n_units = int(np.unique(source).size)
    return null_row(name, observed, null, r_null, r_obs - r_null, int(d_h.size), n_units, unpartnered)


def paired_means(
    observed: np.ndarray, null: np.ndarray, *, n_boot: int, seed: int, sources: np.ndarray | None = None
) -> tuple[float, float, np.ndarray | None, np.ndarray | None, int, int]:
    """Means of the finite cells of two ``[P, T, L]`` arrays, each replicate drawing the same sources.

    Args:
        observed: ``[P, T, L]`` the statistic's cells (NaN: not counted).
        null: ``[P, T, L]`` the null's cells (NaN: not counted).
        n_boot: Bootstrap replicates.
        seed: Seed of the source draws.
        sources: ``[P]`` the source of each prompt (default: each prompt its own).

    Returns:
        ``(observed_mean, null_mean, null_draws, beyond_draws, n, n_units)``: draws ``None`` with
        fewer than two sources; ``n`` the observed cells counted, ``n_units`` the sources with a cell.
    """
    keep_o, keep_n = np.isfinite(observed), np.isfinite(null)
    used = (keep_o | keep_n).reshape(observed.shape[0], -1).any(axis=1)  # prompts with a cell
    codes = source_codes(sources, observed.shape[0])
    prompt = np.broadcast_to(np.arange(observed.shape[0])[:, None, None], observed.shape).ravel()
    weights = [keep_o, np.where(keep_o, observed, 0.0), keep_n, np.where(keep_n, null, 0.0)]
    weights = [np.asarray(w, dtype=np.float64).ravel()[used[prompt]] for w in weights]
    cluster = codes[prompt[used[prompt]]]
    n_units = int(np.unique(codes[used]).size)
    with np.errstate(invalid="ignore", divide="ignore"):
        obs_mean, null_mean = weights[1].sum() / weights[0].sum(), weights[3].sum() / weights[2].sum()
        sums = cluster_sums(weights, cluster, n_boot=n_boot, seed=seed)
        if sums is None:
            return float(obs_mean), float(null_mean), None, None, int(keep_o.sum()), n_units
        m_obs, m_null = sums[1] / sums[0], sums[3] / sums[2]
    return float(obs_mean), float(null_mean), m_null, m_obs - m_null, int(keep_o.sum()), n_units


def pair_containment(jaccard: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Containment ``|A & B| / min(a, b)`` of sets with Jaccard ``J`` and sizes ``a, b`` (float64, any shape).

    ``|A & B| = J (a + b) / (1 + J)``, so the overlap coefficient follows exactly (to float
    precision).  Float excess over 1 is clipped; an excess beyond :data:`CONTAINMENT_TOLERANCE`
    means the Jaccard and the sizes cannot come from one pair of sets and is logged as a warning.
    NaN in any input gives NaN.
    """
    j = np.asarray(jaccard, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        pair = j * (a + b) / ((1 + j) * np.minimum(a, b))
    n_over = int(np.count_nonzero(pair > 1 + CONTAINMENT_TOLERANCE))
    if n_over:
        log.warning("containment above 1 in %d cells: their Jaccard and nucleus sizes disagree; clipped to 1", n_over)
    return np.minimum(pair, 1.0)  # NaN stays NaN


def cross_cells(
    jaccard: np.ndarray, cross: np.ndarray, nucleus: np.ndarray, partner: np.ndarray
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Observed and cross-prompt overlap cells, NaN except where both are valid.

    Args:
        jaccard: ``[P, T, L]`` adjacent-layer Jaccard (the store's ``nucleus_jaccard``).
        cross: ``[P, T, L]`` cross-prompt Jaccard (``nucleus_jaccard_cross``).
        nucleus: ``[P, T, L]`` nucleus sizes.
        partner: ``[P]`` the partner each ``cross`` cell was computed against.

    Returns:
        ``{statistic: (observed, null)}``, ``[P, T, L - 1]`` each, for ``jaccard``,
        ``containment`` and ``containment_size_changes`` (containment where the two sets differ
        in size: the observed where layer ``l + 1``'s size differs from layer ``l``'s, the null
        where the partner's does).
    """
    size = sizes(nucleus)
    a, b, b_other = size[..., :-1], size[..., 1:], of_partner(size, partner)[..., 1:]
    j, j_other = jaccard[..., :-1].astype(np.float64), cross[..., :-1].astype(np.float64)
    c, c_other = pair_containment(j, a, b), pair_containment(j_other, a, b_other)
    both = np.isfinite(c) & np.isfinite(c_other)
    keep = {
        JACCARD: (both, both),
        CONTAINMENT: (both, both),
        CONTAINMENT_SIZE_CHANGES: (both & (a != b), both & (a != b_other)),
    }
    values = {JACCARD: (j, j_other), CONTAINMENT: (c, c_other), CONTAINMENT_SIZE_CHANGES: (c, c_other)}
    return {
        name: tuple(np.where(k, v, np.nan) for k, v in zip(keep[name], values[name], strict=True)) for name in values
    }


def both_singleton_share(nucleus: np.ndarray) -> float:
    """Share of the valid adjacent-layer cells where both top-p sets hold one token (containment = top-1 kept)."""
    size = sizes(nucleus)
    a, b = size[..., :-1], size[..., 1:]
    valid = np.isfinite(a) & np.isfinite(b)
    return float(((a == 1) & (b == 1) & valid).sum() / valid.sum()) if valid.any() else math.nan


def overlap_nulls(ds: xr.Dataset, model: str, *, n_boot: int, seed: int) -> dict[str, dict[str, object]]:
    """The :data:`NULL_COLUMNS` of each overlap statistic of ``model`` (:func:`cross_cells`), keyed by statistic.

    NaN (with a logged warning) for a store extracted without ``nucleus_jaccard_cross``.
    """
    names = (JACCARD, CONTAINMENT, CONTAINMENT_SIZE_CHANGES)
    if CROSS not in ds.data_vars or schema.PARTNER not in ds.coords:
        log.warning("no %s in the store: no cross-prompt null of the overlap (extract again)", CROSS)
        return {name: null_row(RECORDED, math.nan, math.nan, None, None, 0) for name in names}
    partner, name_of_null, unpartnered = partners(ds, model)
    return overlap_null_rows(
        model_values(ds, model, schema.NUCLEUS_JACCARD),
        model_values(ds, model, schema.NUCLEUS_JACCARD_CROSS),
        model_values(ds, model, schema.NUCLEUS_SIZE),
        partner,
        name_of_null,
        n_boot=n_boot,
        seed=seed,
        sources=prompt_sources(ds),
        unpartnered=unpartnered,
    )


def overlap_null_rows(
    jaccard: np.ndarray,
    cross: np.ndarray,
    nucleus: np.ndarray,
    partner: np.ndarray,
    name: str,
    *,
    n_boot: int,
    seed: int,
    sources: np.ndarray | None = None,
    unpartnered: int = 0,
) -> dict[str, dict[str, object]]:
    """The :data:`NULL_COLUMNS` of each overlap statistic of :func:`cross_cells`' arrays, keyed by statistic; the
    intervals resample ``sources`` (``[P]``, each prompt its own by default)."""
    out = {}
    for statistic, (observed, null) in cross_cells(jaccard, cross, nucleus, partner).items():
        obs_mean, null_mean, *draws, n, n_units = paired_means(
            observed, null, n_boot=n_boot, seed=seed, sources=sources
        )
        out[statistic] = null_row(name, obs_mean, null_mean, *draws, n, n_units, unpartnered)
    return out
