"""Image classifiers (ViT and kin) as the lens sees them: blocks, final norm, head, readout.

The lens on an image classifier decodes the residual stream after each block as the model
decodes its last one.  What the model reads is found from what it exposes (never from its
name):

* ``cls``: the classification token (position 0) goes through the backbone's final
  ``layernorm`` and the ``classifier`` (ViT, DeiT, BEiT without mean pooling);
* ``mean``: the patch tokens (positions 1..) are averaged and go through the pooler's
  ``layernorm`` and the ``classifier`` (BEiT, Data2Vec-Vision with mean pooling), the
  backbone's own ``layernorm`` being the identity there.

A head that reads anything else (e.g. DINOv2's concatenated CLS and mean tokens, a
``classifier`` wider than the residual stream) is refused with the reason.  The readout
takes the token (or mean) *before* the norm, which for the ``cls`` readout equals the
model's norm-then-select because layer norm acts on each token alone; the lens then
applies the norm and the head to that ``[B, d]`` vector at every block.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

CLS, MEAN = "cls", "mean"
READOUTS = (CLS, MEAN)


@dataclass(frozen=True)
class VisionParts:
    """What the lens decodes an image classifier with.

    Attributes:
        blocks: The transformer blocks, in order.
        final_norm: The norm applied to the read-out vector before the head.
        head: The classification head (``nn.Linear``, ``[classes, d]``).
        readout: :data:`CLS` or :data:`MEAN` (see the module docstring).
    """

    blocks: nn.ModuleList
    final_norm: nn.Module
    head: nn.Linear
    readout: str


@dataclass(frozen=True)
class ClassNames:
    """Decodes class ids to label names as a tokenizer decodes token ids (for tables and plots)."""

    id2label: dict[int, str]

    def decode(self, ids) -> str:
        """The names of ``ids``, joined by ``", "``; an unnamed id reads as ``class <id>``."""
        return ", ".join(self.id2label.get(int(i), f"class {int(i)}") for i in ids)


def is_image_classifier(config: object) -> bool:
    """Whether transformers maps this config to an image-classification model (ViT, DeiT, BEiT, ...)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING

    return type(config) in MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING


def has_classifier_head(model: nn.Module) -> bool:
    """Whether ``model`` ends in a linear ``classifier`` over its labels (and has no unembedding)."""
    head = getattr(model, "classifier", None)
    labels = getattr(getattr(model, "config", None), "num_labels", None)
    return isinstance(head, nn.Linear) and head.out_features == labels


def find_vision_parts(model: nn.Module) -> VisionParts:
    """Blocks, final norm, head and readout of an image classifier.

    Raises:
        ValueError: naming the architecture and the part that is missing or read differently.
    """
    arch = type(model).__name__
    base = getattr(model, "base_model", model)
    encoder = getattr(base, "encoder", base)
    blocks = next((b for b in (getattr(base, "layers", None), getattr(encoder, "layer", None)) if _is_list(b)), None)
    head = getattr(model, "classifier", None)
    if blocks is None or not isinstance(head, nn.Linear):
        raise ValueError(
            f"image classifier {arch!r} is not supported by the lens: no blocks (base.layers / base.encoder.layer) "
            "or no linear classifier head"
        )
    width = getattr(getattr(model, "config", None), "hidden_size", head.in_features)
    if head.in_features != width:
        raise ValueError(
            f"image classifier {arch!r}: its head reads {head.in_features} features, not one token of width "
            f"{width} (e.g. CLS and mean tokens concatenated); the lens supports CLS or mean-pooled heads"
        )
    pooled_norm = getattr(getattr(base, "pooler", None), "layernorm", None)
    token_norm = getattr(base, "layernorm", None)
    if isinstance(pooled_norm, nn.Module):
        if token_norm is not None and not isinstance(token_norm, nn.Identity):
            raise ValueError(f"image classifier {arch!r} normalizes tokens before mean pooling; not supported")
        return VisionParts(blocks, pooled_norm, head, MEAN)
    if not isinstance(token_norm, nn.Module):
        raise ValueError(f"image classifier {arch!r} has no final layernorm (looked for base.layernorm)")
    return VisionParts(blocks, token_norm, head, CLS)


def _is_list(value: object) -> bool:
    return isinstance(value, nn.ModuleList) and len(value) > 0


def read_out(hidden: torch.Tensor, readout: str) -> torch.Tensor:
    """The vector the head reads from block outputs ``[B, S, d]``: ``[B, d]``.

    Raises:
        ValueError: for an unknown ``readout``.
    """
    if readout == CLS:
        return hidden[:, 0, :]
    if readout == MEAN:
        return hidden[:, 1:, :].mean(dim=1)
    raise ValueError(f"readout must be one of {READOUTS}, got {readout!r}")
