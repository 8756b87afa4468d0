"""Per-prompt feature matrices from combined profile stores.

A *profile* is the ``token x layer`` matrix of one metric for one prompt: Shannon
``entropy`` or ``renyi`` at one order ``alpha`` (nats).  This module turns profiles
into feature vectors for kNN (per-label summaries for plots are :mod:`entropy_lens.analysis.bands`).

Modes (``FeatureSettings.mode``)
    ``concat``   the ``T' x L`` matrix flattened token-major (the study's primary reading).
    ``mean``     the mean over tokens: ``L`` values.
    ``windows``  the ``T'`` tokens split into ``n_windows`` near-equal consecutive windows
                 (``numpy.array_split``), each averaged, concatenated: ``n_windows * L`` values.

Masked-token rule (``FeatureSettings.mask_rule``)
    Generation stops early for some prompts; their later token slots are masked (NaN).
    A prompt's *valid length* is its number of leading slots that are finite on every
    real layer.  Masked slots are never zero-filled:

    ``last``      every masked slot takes the prompt's last valid token profile, so all
                  prompts keep the full ``T`` slots (default; one early stop costs nothing
                  to the other prompts).
    ``truncate``  every prompt is cut to the shortest valid length across the compared
                  set (``T' = min valid length``), so only generated tokens enter.

    Prompts with no valid token at all are dropped with a logged warning under both rules.

Layers: a single model's features use its real layers (``layer < n_layers``).  Pooled
features across models (e.g. the ``family`` target) are first resampled onto a common
normalized-depth grid by linear interpolation (:func:`~entropy_lens.analysis.depth.resample_depth`), never padded.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from entropy_lens.analysis.depth import DEFAULT_GRID_POINTS, depth_grid, resample_depth
from entropy_lens.prompts.datasets import PROMPT_ID, SOURCE_COLUMNS
from entropy_lens.store import schema
from entropy_lens.store.storage import as_str

log = logging.getLogger(__name__)

METRICS = (schema.ENTROPY, schema.RENYI)
MODES = ("concat", "mean", "windows")
MASK_RULES = ("last", "truncate")
DEFAULT_MODE = "concat"
DEFAULT_MASK_RULE = "last"
DEFAULT_WINDOWS = 4
# A blank prompt is the BOS token alone, so a model's first generated token reads the same context in every sample:
# its profile is one value per model (spread below 1e-5), not one per sample. Family features (the family and
# model-identity kNN, the held-out family, the same-family pairs' gaps) start at this token slot
# (docs/verdicts.md, "The right units"); token 0's final-layer entropy is the family's simplest feature instead.
FAMILY_FIRST_TOKEN = 1


@dataclass(frozen=True)
class FeatureSettings:
    """How profiles become feature vectors (see the module docstring).

    Attributes:
        mode: One of :data:`MODES`.
        mask_rule: One of :data:`MASK_RULES`.
        n_windows: Number of token windows for ``mode="windows"``.
        grid_points: Points of the common normalized-depth grid for pooled features.
    """

    mode: str = DEFAULT_MODE
    mask_rule: str = DEFAULT_MASK_RULE
    n_windows: int = DEFAULT_WINDOWS
    grid_points: int = DEFAULT_GRID_POINTS

    @classmethod
    def from_config(cls, knn: Mapping[str, Any]) -> FeatureSettings:
        """The settings of a validated ``analysis.knn`` config section (``feature`` and ``windows``)."""
        return cls(mode=knn["feature"], n_windows=knn["windows"])

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"feature mode must be one of {MODES}, got {self.mode!r}")
        if self.mask_rule not in MASK_RULES:
            raise ValueError(f"mask_rule must be one of {MASK_RULES}, got {self.mask_rule!r}")
        if not isinstance(self.n_windows, int) or self.n_windows < 1:
            raise ValueError(f"n_windows must be a positive int, got {self.n_windows!r}")
        if not isinstance(self.grid_points, int) or self.grid_points < 2:
            raise ValueError(f"grid_points must be an int >= 2, got {self.grid_points!r}")


@dataclass(frozen=True)
class Features:
    """A feature matrix and the samples its rows stand for.

    Attributes:
        X: ``[N, F]`` float64 features.
        models: ``[N]`` model name of each row.
        prompts: ``[N]`` prompt id of each row.
    """

    X: np.ndarray
    models: np.ndarray
    prompts: np.ndarray


def plain(values: np.ndarray) -> np.ndarray:
    """Coordinate values with strings as Python ``str`` objects (Zarr may return StringDType)."""
    values = np.asarray(values)
    return as_str(values) if values.dtype.kind in "OSTU" else values


def prompt_ids(ds: xr.Dataset, prompts: Sequence[str] | None = None) -> np.ndarray:
    """``[N]`` prompt ids as ``str`` objects: ``prompts`` if given, else every prompt of ``ds``."""
    return as_str(np.asarray(ds.indexes[schema.PROMPT] if prompts is None else list(prompts), dtype=object))


def source_coordinate(ds: xr.Dataset) -> str:
    """The prompt coordinate naming each prompt's source in ``ds``, or ``prompt`` where each prompt is its own.

    The :data:`entropy_lens.prompts.datasets.SOURCE_COLUMNS` entry of its ``dataset`` attribute (without one,
    the first such coordinate it has); ``prompt`` for a blank sample, or a store without the column.
    """
    named = SOURCE_COLUMNS.get(str(ds.attrs.get("dataset", "")))
    candidates = [named] if named is not None else [c for c in SOURCE_COLUMNS.values() if c != PROMPT_ID]
    found = [c for c in candidates if c in ds.coords and ds[c].dims == (schema.PROMPT,)]
    return found[0] if found else schema.PROMPT


def prompt_sources(ds: xr.Dataset) -> np.ndarray:
    """``[P]`` source of each prompt of ``ds`` (:func:`source_coordinate`), as ``str`` objects in store order."""
    return as_str(ds[source_coordinate(ds)].values)


def metric_array(ds: xr.Dataset, metric: str = schema.ENTROPY, alpha: float | None = None) -> xr.DataArray:
    """Select one metric lazily: ``entropy``, or ``renyi`` at order ``alpha``.

    Args:
        ds: A combined (or per-model) profile dataset, possibly dask-backed.
        metric: ``"entropy"`` or ``"renyi"``.
        alpha: The Rényi order (required for ``renyi``, must be ``None`` for ``entropy``).

    Returns:
        The variable without the ``alpha`` dim, still lazy.
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    if metric == schema.ENTROPY:
        if alpha is not None:
            raise ValueError(f"metric 'entropy' takes no alpha, got alpha={alpha!r}; use metric='renyi'")
        return ds[schema.ENTROPY]
    if alpha is None:
        raise ValueError("metric 'renyi' needs an alpha, e.g. alpha=2.0")
    return ds[schema.RENYI].isel({schema.ALPHA: alpha_index(ds, alpha)})


def alpha_index(ds: xr.Dataset, alpha: float) -> int:
    """Position of Rényi order ``alpha`` on the ``alpha`` coordinate (``inf`` allowed)."""
    alphas = np.asarray(ds[schema.ALPHA].values, dtype=np.float64)
    hits = np.flatnonzero(np.isclose(alphas, float(alpha)) | ((alphas == float(alpha)) & np.isinf(alphas)))
    if hits.size == 0:
        raise ValueError(f"alpha={alpha!r} is not in the store; available alphas: {alphas.tolist()}")
    return int(hits[0])


def metric_label(metric: str, alpha: float | None) -> str:
    """Human-readable name: ``"shannon"`` or ``"renyi(a=2)"``."""
    return "shannon" if metric == schema.ENTROPY else f"renyi(a={alpha:g})"


def model_names(ds: xr.Dataset | xr.DataArray, models: Sequence[str] | None = None) -> list[str]:
    """``models`` as ``str``, or every model of ``ds`` in store order."""
    return [str(m) for m in (ds.indexes[schema.MODEL] if models is None else models)]


def model_n_layers(ds: xr.Dataset, model: str) -> int:
    """Real layer count of ``model`` in a combined dataset."""
    return int(schema.real_layers(ds[schema.N_LAYERS], model).values)


def model_depth(ds: xr.Dataset, model: str) -> np.ndarray:
    """``[L_m]`` normalized depths of ``model``'s real layers."""
    return np.asarray(schema.real_layers(ds[schema.DEPTH], model).values, dtype=np.float64)


def model_info(ds: xr.Dataset, model: str) -> dict[str, object]:
    """The columns naming ``model`` in a per-model row: ``model``, ``family`` (``""`` without it), ``n_layers``."""
    family = str(ds[schema.FAMILY].sel({schema.MODEL: model}).values) if schema.FAMILY in ds.coords else ""
    return {"model": model, "family": family, "n_layers": model_n_layers(ds, model)}


def model_values(ds: xr.Dataset, model: str, variable: str | xr.DataArray) -> np.ndarray:
    """``[P, T, L_m]`` values of one ``(model, prompt, token, layer)`` variable on the model's real layers."""
    data = ds[variable] if isinstance(variable, str) else variable
    data = schema.real_layers(data, model).transpose(schema.PROMPT, schema.TOKEN, schema.LAYER)
    return np.asarray(data.values)


def model_profiles(
    ds: xr.Dataset,
    model: str,
    *,
    metric: str = schema.ENTROPY,
    alpha: float | None = None,
    prompts: Sequence[str] | None = None,
) -> np.ndarray:
    """Load one model's profiles on its real layers.

    Args:
        ds: Combined dataset (lazy is fine: only this slice is read).
        model: Model name on the ``model`` coordinate.
        metric: ``"entropy"`` or ``"renyi"``.
        alpha: Rényi order for ``renyi``.
        prompts: Prompt ids to keep, in this order (default: all).

    Returns:
        ``[N, T, L_m]`` float64 profiles in nats; masked slots are NaN.
    """
    arr = schema.real_layers(metric_array(ds, metric, alpha), model)
    if prompts is not None:
        arr = arr.sel({schema.PROMPT: list(prompts)})
    arr = arr.transpose(schema.PROMPT, schema.TOKEN, schema.LAYER)
    return np.asarray(arr.values, dtype=np.float64)


def valid_lengths(profiles: np.ndarray) -> np.ndarray:
    """``[N]`` number of leading token slots that are finite on every layer.

    Args:
        profiles: ``[N, T, L]`` profiles.
    """
    finite = np.isfinite(profiles).all(axis=2)  # [N, T]
    return np.where(finite.all(axis=1), finite.shape[1], np.argmin(finite, axis=1))


def apply_mask_rule(profiles: np.ndarray, rule: str) -> tuple[np.ndarray, np.ndarray]:
    """Make profiles complete by the masked-token rule (see the module docstring).

    Args:
        profiles: ``[N, T, L]`` profiles with NaN in masked slots.
        rule: ``"last"`` or ``"truncate"``.

    Returns:
        ``(complete, keep)``: ``[N', T', L]`` finite profiles and the ``[N]`` bool mask of
        prompts kept (those with at least one valid token).
    """
    if rule not in MASK_RULES:
        raise ValueError(f"mask_rule must be one of {MASK_RULES}, got {rule!r}")
    if profiles.ndim != 3:
        raise ValueError(f"profiles must be [N, T, L], got shape {profiles.shape}")
    lengths = valid_lengths(profiles)
    keep = lengths > 0
    if not keep.all():
        log.warning("%d of %d prompts have no valid token and are dropped", int((~keep).sum()), keep.size)
    if not keep.any():
        raise ValueError("no prompt has a valid (finite) token profile; check the store for an empty generation")
    kept, lengths = profiles[keep], lengths[keep]
    if rule == "truncate":
        return kept[:, : int(lengths.min())].copy(), keep
    slots = np.minimum(np.arange(kept.shape[1])[None, :], lengths[:, None] - 1)  # [N', T]
    return np.take_along_axis(kept, slots[:, :, None], axis=1), keep


def token_features(profiles: np.ndarray, mode: str, n_windows: int = DEFAULT_WINDOWS) -> np.ndarray:
    """Reduce complete profiles to feature vectors.

    Args:
        profiles: ``[N, T, L]`` finite profiles.
        mode: ``"concat"`` (``T * L`` features), ``"mean"`` (``L``) or ``"windows"``
            (``n_windows * L``).
        n_windows: Window count for ``"windows"``; must not exceed ``T``.

    Returns:
        ``[N, F]`` float64 features.
    """
    n, t, _ = profiles.shape
    if mode == "concat":
        return profiles.reshape(n, -1)
    if mode == "mean":
        return profiles.mean(axis=1)
    if mode == "windows":
        if n_windows > t:
            raise ValueError(f"n_windows={n_windows} exceeds the {t} usable token slots; lower n_windows")
        parts = np.array_split(profiles, n_windows, axis=1)
        return np.concatenate([p.mean(axis=1) for p in parts], axis=1)
    raise ValueError(f"feature mode must be one of {MODES}, got {mode!r}")


def check_first_token(first_token: int, ds: xr.Dataset) -> int:
    """``first_token``, or a ``ValueError`` unless it leaves at least one of the store's token slots."""
    slots = ds.sizes[schema.TOKEN]
    if not isinstance(first_token, int) or isinstance(first_token, bool) or not 0 <= first_token < slots:
        raise ValueError(
            f"first_token must be an int in [0, {slots}) (the store has {slots} token slots), got {first_token!r}"
        )
    return first_token


def model_features(
    ds: xr.Dataset,
    model: str,
    *,
    metric: str = schema.ENTROPY,
    alpha: float | None = None,
    settings: FeatureSettings | None = None,
    prompts: Sequence[str] | None = None,
) -> Features:
    """Feature matrix of one model's prompts on its own layers.

    Args:
        ds: Combined dataset (lazy is fine).
        model: Model name.
        metric: ``"entropy"`` or ``"renyi"``.
        alpha: Rényi order for ``renyi``.
        settings: Mode, masked-token rule and windows (default :class:`FeatureSettings`).
        prompts: Prompt ids to use (default: all).

    Returns:
        :class:`Features` with one row per kept prompt.
    """
    settings = settings or FeatureSettings()
    ids = prompt_ids(ds, prompts)
    profiles = model_profiles(ds, model, metric=metric, alpha=alpha, prompts=ids)
    complete, keep = apply_mask_rule(profiles, settings.mask_rule)
    X = token_features(complete, settings.mode, settings.n_windows)
    return Features(X, np.full(int(keep.sum()), model, dtype=object), ids[keep])


def pooled_features(
    ds: xr.Dataset,
    *,
    metric: str = schema.ENTROPY,
    alpha: float | None = None,
    settings: FeatureSettings | None = None,
    models: Sequence[str] | None = None,
    prompts: Sequence[str] | None = None,
    first_token: int = 0,
) -> Features:
    """Feature matrix over ``(model, prompt)`` samples on a common depth grid.

    Each model's profiles are resampled onto :func:`depth_grid` (``settings.grid_points``),
    then the masked-token rule runs over all samples together.  ``first_token``: the first token
    slot read (:data:`FAMILY_FIRST_TOKEN` for family features; 0: every slot).

    Returns:
        :class:`Features` with one row per kept ``(model, prompt)`` pair, models in order.
    """
    settings = settings or FeatureSettings()
    names = [str(m) for m in (ds.indexes[schema.MODEL] if models is None else models)]
    ids = prompt_ids(ds, prompts)
    grid = depth_grid([model_n_layers(ds, m) for m in names], settings.grid_points)
    stacked = [
        resample_depth(
            model_profiles(ds, m, metric=metric, alpha=alpha, prompts=ids)[:, check_first_token(first_token, ds) :],
            model_depth(ds, m),
            grid,
        )
        for m in names
    ]
    complete, keep = apply_mask_rule(np.concatenate(stacked, axis=0), settings.mask_rule)
    X = token_features(complete, settings.mode, settings.n_windows)
    models_col = np.repeat(np.asarray(names, dtype=object), ids.size)[keep]
    return Features(X, models_col, np.tile(ids, len(names))[keep])
