"""Lenses fitted to the model, as artifacts: a per-block affine translator applied before the final norm and
unembedding.

The logit lens reads every block's residual through the model's own head, which is biased where a block's
residual is not yet in the basis the head expects (early blocks most). A fitted lens first maps block ``l``'s
residual ``h`` to ``h @ weight[l] + bias[l]``, then decodes it as the logit lens does. Kinds:

* ``logit``: the identity at every block (the study's lens);
* ``linear``: per block, the affine map from the block's residual to the final block's residual, fitted by
  least squares in closed form (Din et al., 2023, "Jump to conclusions"): float64 normal equations summed
  over every token of a corpus, one solve per block;
* ``tuned``: per block, an affine translator initialised at the identity and trained to minimise the KL
  divergence from the model's own final distribution to the lens's (Belrose et al., 2023, the tuned lens).

The final block's translator is the identity for every kind, so the lens of the final block is the model's
own logits. Translators are artifacts: :meth:`Translators.save` writes a safetensors file whose metadata
carries the kind and the provenance (corpus, tokens, seed, dtype). They are fitted in
:mod:`entropy_lens.lens.fitting` and judged on held-out prompts in :mod:`entropy_lens.lens.held_out`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from entropy_lens.model.lens_model import LensModel
from entropy_lens.store.tensors import content_digest, load_tensors, save_tensors

LENS_KINDS = ("logit", "linear", "tuned")
_METADATA_KEY = "entropy_lens_translators"


@dataclass(frozen=True)
class Translators:
    """One affine map per block, ``h -> h @ weight[l] + bias[l]`` (float32), the last one the identity.

    Attributes:
        kind: One of :data:`LENS_KINDS`.
        weight: ``[L, d, d]``.
        bias: ``[L, d]``.
        provenance: What it was fitted on (corpus, prompts, tokens, seed, dtype, model).
    """

    kind: str
    weight: torch.Tensor
    bias: torch.Tensor
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in LENS_KINDS:
            raise ValueError(f"lens kind must be one of {LENS_KINDS}, got {self.kind!r}")
        n, d = self.bias.shape[0], self.bias.shape[-1]
        if self.weight.shape != (n, d, d) or self.bias.shape != (n, d):
            raise ValueError(
                f"translators need weight [L, d, d] and bias [L, d] of one L and d, "
                f"got {tuple(self.weight.shape)} and {tuple(self.bias.shape)}"
            )
        eye = torch.eye(d, dtype=self.weight.dtype, device=self.weight.device)
        if not (torch.equal(self.weight[-1], eye) and not self.bias[-1].any()):
            raise ValueError(
                "the final block's translator must be the identity (the lens of the final block is the model's)"
            )

    @property
    def n_layers(self) -> int:
        return int(self.bias.shape[0])

    @property
    def hidden_size(self) -> int:
        return int(self.bias.shape[1])

    def check_model(self, lm: LensModel) -> None:
        """Raise unless these translators fit ``lm``'s blocks and width."""
        width = int(lm.unembed.weight.shape[1])
        if (self.n_layers, self.hidden_size) != (lm.n_layers, width):
            raise ValueError(
                f"translators for {self.n_layers} blocks of width {self.hidden_size} do not fit {lm.name!r} "
                f"({lm.n_layers} blocks of width {width}); fit them on this model"
            )

    def apply(self, resid: torch.Tensor) -> torch.Tensor:
        """Residuals ``[..., L, d]`` mapped block by block, in float32, returned in their own dtype."""
        if self.kind == "logit":
            return resid
        weight, bias = self.weight.to(resid.device), self.bias.to(resid.device)
        return (torch.einsum("...ld,lde->...le", resid.float(), weight) + bias).to(resid.dtype)

    def digest(self) -> str:
        """SHA-256 of the translators (kind, provenance, weights): what a store under this lens records."""
        return content_digest(self._tensors(), self._metadata())

    def _tensors(self) -> dict[str, torch.Tensor]:
        return {"weight": self.weight.float().cpu(), "bias": self.bias.float().cpu()}

    def _metadata(self) -> dict[str, str]:
        return {_METADATA_KEY: json.dumps({"kind": self.kind, "provenance": dict(self.provenance)}, sort_keys=True)}

    def save(self, path: str | os.PathLike) -> Path:
        """Write a safetensors file (the kind and provenance in its metadata, with a checksum), atomically."""
        return save_tensors(self._tensors(), path, self._metadata())

    @classmethod
    def load(cls, path: str | os.PathLike) -> Translators:
        """Read what :meth:`save` wrote.

        Raises:
            ValueError: naming the file when it is damaged (:class:`DamagedTensorsError`) or holds no
                translators.
        """
        tensors, metadata = load_tensors(path)
        meta = metadata.get(_METADATA_KEY)
        if meta is None or set(tensors) != {"weight", "bias"}:
            raise ValueError(f"{path} holds no entropy-lens translators (weight, bias and their metadata)")
        info = json.loads(meta)
        return cls(info["kind"], tensors["weight"], tensors["bias"], info["provenance"])


def identity(n_layers: int, hidden_size: int) -> Translators:
    """The logit lens as translators: the identity at every block."""
    eye = torch.eye(hidden_size).expand(n_layers, hidden_size, hidden_size).clone()
    return Translators("logit", eye, torch.zeros(n_layers, hidden_size))
