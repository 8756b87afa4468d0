"""The profile dataset: output buffers filled step by step, the store's provenance, the dataset.

Text extraction (:mod:`entropy_lens.lens.text`) and image profiles (:mod:`entropy_lens.lens.vision`)
fill the same :class:`ProfileBuffers`, take their attrs from the one :func:`profile_attrs` and
wrap them with :func:`build_dataset` into a dataset that follows :mod:`entropy_lens.store.schema`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import xarray as xr

from entropy_lens.lens.decoding import LensSettings, StepMetrics
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.model.lens_model import LensModel
from entropy_lens.store import schema


@dataclass
class ProfileBuffers:
    """Output arrays ``[N, T, L(, A)]`` filled step by step; masked slots keep fills."""

    n_prompts: int
    n_tokens: int
    n_layers: int
    n_alphas: int
    top_k: int = 0  # routing slots per (token, layer); 0: a dense model records no routing
    n_choices: int = 0  # choices read at the first step (Readout); 0: none
    cross: bool = False  # record the cross-prompt overlap and each prompt's partner (text extraction)
    keep_top: int = 0  # the lens's top tokens kept per (token, layer) (LensSettings.top_k); 0: none
    arrays: dict[str, np.ndarray] = field(init=False)

    def __post_init__(self) -> None:
        shape = (self.n_prompts, self.n_tokens, self.n_layers)
        self.arrays = {
            schema.ENTROPY: np.full(shape, np.nan, np.float32),
            schema.RENYI: np.full((*shape, self.n_alphas), np.nan, np.float32),
            schema.NUCLEUS_SIZE: np.full(shape, schema.MASKED_INT, np.int32),
            schema.NUCLEUS_JACCARD: np.full(shape, np.nan, np.float32),
            schema.TOP1_ID: np.full(shape, schema.MASKED_INT, np.int32),
            schema.TOKEN_ID: np.full(shape[:2], schema.MASKED_INT, np.int32),
        }
        if self.n_choices:
            self.arrays[schema.CHOICE_LOGPROB] = np.full((self.n_prompts, self.n_choices), np.nan, np.float32)
        if self.cross:
            self.arrays[schema.NUCLEUS_JACCARD_CROSS] = np.full(shape, np.nan, np.float32)
            self.arrays[schema.PARTNER] = np.full(self.n_prompts, schema.MASKED_INT, np.int64)  # prompt index
        if self.keep_top:
            self.arrays[schema.TOP_IDS] = np.full((*shape, self.keep_top), schema.MASKED_INT, np.int32)
            self.arrays[schema.TOP_PROBS] = np.full((*shape, self.keep_top), np.nan, np.float32)
        if self.top_k:
            self.arrays[schema.ROUTING_ENTROPY] = np.full(shape, np.nan, np.float32)
            self.arrays[schema.ROUTING_EXPERTS] = np.full((*shape, self.top_k), schema.MASKED_INT, np.int32)

    def put(self, rows: np.ndarray, step: int, sm: StepMetrics) -> None:
        for name in (schema.ENTROPY, schema.RENYI, schema.NUCLEUS_SIZE, schema.NUCLEUS_JACCARD, schema.TOP1_ID):
            self.arrays[name][rows, step] = getattr(sm, name)
        if self.cross:
            self.arrays[schema.NUCLEUS_JACCARD_CROSS][rows, step] = sm.nucleus_jaccard_cross
        if self.keep_top and sm.top_ids is not None:
            k = sm.top_ids.shape[-1]  # at most the vocabulary
            self.arrays[schema.TOP_IDS][rows, step, :, :k] = sm.top_ids
            self.arrays[schema.TOP_PROBS][rows, step, :, :k] = sm.top_probs

    def put_routing(self, rows: np.ndarray, step: int, entropy: np.ndarray, experts: np.ndarray) -> None:
        self.arrays[schema.ROUTING_ENTROPY][rows, step] = entropy
        self.arrays[schema.ROUTING_EXPERTS][rows, step] = experts


def profile_attrs(
    lm: LensModel,
    lens: LensSettings,
    generation: GenerationSettings,
    *,
    chat_template: bool,
    lens_kind: str = "logit",
    lens_sha256: str = "",
) -> dict:
    """The attrs of a profile store: :func:`entropy_lens.store.schema.provenance` of the model, the
    lens settings (the lens kind, and the checksum of a fitted lens's translators) and how tokens were chosen.

    An image classifier's store (``lm.readout`` set) adds ``modality = "image"`` and its
    ``readout``; it runs each image once, which ``generation`` records as one greedy step. ``threads`` is what
    torch runs on now (the job set it): float sums, hence the stored bytes, depend on it.
    """
    image = {} if lm.readout is None else {"modality": "image", "readout": lm.readout}
    return schema.provenance(
        model_name=lm.name,
        model_source=lm.source,
        model_sha256=lm.sha256,
        model_family=lm.family,
        n_layers=lm.n_layers,
        n_params=lm.n_params,
        vocab_size=lm.vocab_size,
        dtype=str(lm.dtype).removeprefix("torch."),
        device=str(lm.device),
        top_p=lens.top_p,
        alphas=list(lens.alphas),
        max_new_tokens=generation.max_new_tokens,
        do_sample=generation.do_sample,
        temperature=generation.temperature,
        seed=generation.seed,
        chat_template=chat_template,
        softcap=lm.softcap,
        lens_kind=lens_kind,
        lens_sha256=lens_sha256,
        threads=torch.get_num_threads(),
        **image,
    )


def build_dataset(
    arrays: dict[str, np.ndarray],
    prompt_ids: Sequence[str],
    rendered: Sequence[str],
    n_layers: int,
    alphas: Sequence[float],
    attrs: dict,
    choices: Sequence[str] = (),
) -> xr.Dataset:
    """Wrap metric arrays into a schema-conformant dataset (validated before return).

    ``choices`` labels the ``choice`` dim of ``choice_logprob`` when ``arrays`` holds it; an
    ``arrays["partner"]`` of prompt indices (``-1``: none) becomes the ``partner`` coordinate of ids.
    """
    layers = np.arange(n_layers, dtype=np.int32)
    coords = {
        schema.PROMPT: np.asarray(prompt_ids, dtype=object),
        schema.PROMPT_TEXT: (schema.PROMPT, np.asarray(rendered, dtype=object)),
        schema.TOKEN: np.arange(arrays[schema.TOKEN_ID].shape[1], dtype=np.int32),
        schema.LAYER: layers,
        schema.DEPTH: (schema.LAYER, schema.depth_of(layers, n_layers)),
        schema.ALPHA: np.asarray(alphas, dtype=np.float64),
    }
    specs = {
        **schema.VARIABLES,
        **{k: v for k, v in schema.ROUTING_VARIABLES.items() if k in arrays},
        **schema.optional_variables(arrays),
        **{k: v for k, v in schema.CROSS_VARIABLES.items() if k in arrays},
    }
    data_vars = {
        name: (spec.dims, arrays[name], {"units": spec.units, "long_name": spec.description})
        for name, spec in specs.items()
    }
    if schema.PARTNER in arrays:
        ids, partner = np.asarray(prompt_ids, dtype=object), arrays[schema.PARTNER]
        coords[schema.PARTNER] = (schema.PROMPT, np.where(partner >= 0, ids[partner], "").astype(object))
    if choices:
        coords[schema.CHOICE] = np.asarray(choices, dtype=object)
    if schema.TOP_IDS in arrays:
        coords[schema.TOP_RANK] = np.arange(arrays[schema.TOP_IDS].shape[-1], dtype=np.int32)
    if schema.ROUTING_EXPERTS in arrays:
        coords[schema.EXPERT_RANK] = np.arange(arrays[schema.ROUTING_EXPERTS].shape[-1], dtype=np.int32)
    ds = xr.Dataset(data_vars, coords=coords, attrs=attrs)
    schema.validate_profiles(ds)
    return ds
