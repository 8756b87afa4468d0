"""A model as the lens reads it: a frozen causal LM (or image classifier) and its lens parts.

A :class:`LensModel` bundles the model with what the logit lens needs, found from what the architecture
exposes (never from its name): the stack of decoder blocks, the final norm, the unembedding and any final-logit
soft-capping.  An image classifier (ViT, DeiT, BEiT: a config transformers maps to image classification) is
bundled the same way, its classification head standing for the unembedding and its image processor for the
tokenizer (:mod:`entropy_lens.model.vision`).  Loading one is :mod:`entropy_lens.model.loading`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from entropy_lens.model.vision import find_vision_parts, has_classifier_head

# Attribute of an unembedding holding the handle of its contiguous-input hook (:func:`contiguous_head_input`).
CONTIGUOUS_HOOK = "_entropy_lens_contiguous_hook"
_BLOCK_ATTRS = ("layers", "h", "blocks", "layer")
_NORM_ATTRS = ("norm", "ln_f", "final_layer_norm", "final_layernorm", "final_norm")


@dataclass(frozen=True)
class LensModel:
    """A frozen causal LM (or image classifier) plus the parts the logit lens decodes with.

    Attributes:
        model: The Hugging Face causal LM (or image classifier), in eval mode.
        tokenizer: Its tokenizer (left padding); an image classifier's image processor.
        name: Registry name, hub id or path the model came from.
        source: Where the weights came from (``registry:...``, ``hub:...``, a path).
        sha256: Checksum of the source file, or ``""`` where there is no single file.
        family: Model family label (``"unknown"`` when not given).
        blocks: The decoder blocks, in order.
        final_norm: The norm applied before the unembedding.
        unembed: The unembedding (``get_output_embeddings()``); an image classifier's head.
        softcap: Final-logit soft-capping constant, or ``None``.
        readout: ``None`` for a causal LM; for an image classifier, what its head reads
            (``"cls"`` or ``"mean"``, see :mod:`entropy_lens.model.vision`).
    """

    model: nn.Module
    tokenizer: object
    name: str
    source: str
    sha256: str
    family: str
    blocks: nn.ModuleList
    final_norm: nn.Module
    unembed: nn.Module
    softcap: float | None
    readout: str | None = None

    @property
    def n_layers(self) -> int:
        return len(self.blocks)

    @property
    def vocab_size(self) -> int:
        return int(self.unembed.weight.shape[0])

    @property
    def device(self) -> torch.device:
        return self.unembed.weight.device

    @property
    def n_params(self) -> int:
        """Parameter count; tied input and output embeddings count once."""
        return sum(p.numel() for p in self.model.parameters())

    @property
    def dtype(self) -> torch.dtype:
        return self.unembed.weight.dtype


def architecture_of(model: nn.Module) -> str:
    """The architecture name a user would recognise (config ``architectures`` or class)."""
    archs = getattr(getattr(model, "config", None), "architectures", None)
    return archs[0] if archs else type(model).__name__


def find_lens_parts(model: nn.Module) -> tuple[nn.ModuleList, nn.Module, nn.Module, float | None]:
    """Find ``(blocks, final_norm, unembed, softcap)`` from what ``model`` exposes.

    Raises:
        ValueError: naming the architecture when a part cannot be found.
    """
    arch = architecture_of(model)
    decoder = _decoder_of(model)
    blocks = next(
        (getattr(decoder, a) for a in _BLOCK_ATTRS if isinstance(getattr(decoder, a, None), nn.ModuleList)),
        None,
    )
    norm = next((getattr(decoder, a) for a in _NORM_ATTRS if isinstance(getattr(decoder, a, None), nn.Module)), None)
    unembed = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    missing = [n for n, v in (("decoder blocks", blocks), ("final norm", norm), ("unembedding", unembed)) if v is None]
    if missing:
        raise ValueError(
            f"architecture {arch!r} is not supported by the lens: could not find its "
            f"{', '.join(missing)} (looked for blocks in {_BLOCK_ATTRS}, norms in {_NORM_ATTRS})"
        )
    return blocks, norm, unembed, _softcap_of(model)


def _decoder_of(model: nn.Module) -> nn.Module:
    base = getattr(model, "base_model", model)
    if hasattr(model, "get_decoder"):
        try:
            decoder = model.get_decoder()
        except (AttributeError, NotImplementedError):
            decoder = None
        if isinstance(decoder, nn.Module):
            return decoder
    return base


def _softcap_of(model: nn.Module) -> float | None:
    config = getattr(model, "config", None)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    cap = getattr(text, "final_logit_softcapping", None)
    return float(cap) if cap else None


def wrap_model(
    model: nn.Module,
    tokenizer: object,
    *,
    name: str,
    source: str = "in-memory",
    sha256: str = "",
    family: str = "unknown",
) -> LensModel:
    """Bundle an already loaded causal LM and tokenizer (or image classifier and image processor)
    into a :class:`LensModel`."""
    model.eval()
    model.requires_grad_(False)
    if has_classifier_head(model):
        parts = find_vision_parts(model)
        return LensModel(
            model,
            tokenizer,
            name,
            source,
            sha256,
            family,
            parts.blocks,
            parts.final_norm,
            parts.head,
            None,
            parts.readout,
        )
    blocks, norm, unembed, softcap = find_lens_parts(model)
    contiguous_head_input(unembed)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return LensModel(model, tokenizer, name, source, sha256, family, blocks, norm, unembed, softcap)


def _contiguous_input(_module: nn.Module, args: tuple) -> tuple | None:
    if not args or not isinstance(args[0], torch.Tensor) or args[0].is_contiguous():
        return None
    return (args[0].contiguous(), *args[1:])


def contiguous_head_input(unembed: nn.Module) -> None:
    """Hand the unembedding a contiguous input (once per module; values unchanged).

    A causal LM called with ``logits_to_keep=1`` feeds its head the strided slice
    ``hidden[:, -1:, :]``.  On CPU, torch turns a strided 3-D input into a batched
    matmul against a copy of the weight expanded per row; in bfloat16, for a 151,936 x 1,536
    head and 8 prompts, that is gigabytes copied per call, over half of an MMLU extraction
    (float32 takes a faster path; ``benchmarks/bench_mmlu.py`` measures both).
    Copying the ``[B, 1, d]`` slice first is a few kilobytes.
    """
    if getattr(unembed, CONTIGUOUS_HOOK, None) is None:
        setattr(unembed, CONTIGUOUS_HOOK, unembed.register_forward_pre_hook(_contiguous_input))
