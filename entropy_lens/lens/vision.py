"""The lens on image classifiers: an entropy profile over classes for every image.

Each image runs through the classifier once (no generation).  After every block the
vector its head reads (the CLS token, or the mean of the patch tokens where the model
mean-pools; :mod:`entropy_lens.model.vision`) is decoded through the model's final norm and
classification head, exactly as its last block is, and the lens metrics of
:func:`entropy_lens.lens.decoding.decode_residuals` are taken over the classes: Shannon and
Rényi entropy, top-p nucleus size and adjacent-layer Jaccard, top-1 class.  The store
follows the text contract with a token dimension of length 1 (see
:mod:`entropy_lens.store.schema`); ``token_id`` holds the model's own predicted class.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence

import numpy as np
import torch
import xarray as xr

from entropy_lens.lens.decoding import LensSettings, decode_residuals
from entropy_lens.lens.profiles import ProfileBuffers, build_dataset, profile_attrs
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.model.hooks import record_residuals
from entropy_lens.model.lens_model import LensModel
from entropy_lens.store import schema

ImageLike = bytes | object  # encoded bytes (PNG, JPEG, ...) or a PIL image
# No generation: each image runs through the model once, which its store records as one greedy step.
ONE_PASS = GenerationSettings(max_new_tokens=1)


def to_rgb(image: ImageLike):
    """A PIL RGB image from encoded bytes or a PIL image (grey or RGBA images are converted)."""
    from PIL import Image

    if isinstance(image, (bytes, bytearray)):
        image = Image.open(io.BytesIO(image))
    if not isinstance(image, Image.Image):
        raise TypeError(f"an image must be encoded bytes or a PIL image, got {type(image).__name__}")
    return image.convert("RGB")


@torch.inference_mode()
def pixel_values(lm: LensModel, images: Sequence[ImageLike]) -> torch.Tensor:
    """``[B, C, H, W]`` inputs of ``images`` from the model's own image processor, in its dtype and device."""
    batch = lm.tokenizer(images=[to_rgb(i) for i in images], return_tensors="pt")["pixel_values"]
    return batch.to(device=lm.device, dtype=lm.dtype)


@torch.inference_mode()
def classify_with_readouts(lm: LensModel, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The read-out vector after every block (``[B, L, d]``) and the model's own logits (``[B, C]`` float32)."""
    if lm.readout is None:
        raise ValueError(f"model {lm.name!r} is not an image classifier; its lens reads generated tokens")
    with record_residuals(lm) as slots:
        logits = lm.model(pixel_values=pixels).logits.float()
    return torch.stack(slots, dim=1), logits  # type: ignore[arg-type]


def extract_image_profiles(
    lm: LensModel,
    images: Sequence[ImageLike],
    *,
    prompt_ids: Sequence[str] | None = None,
    references: Sequence[str] | None = None,
    lens: LensSettings | None = None,
    batch_size: int = 8,
    progress: Callable[[int], None] | None = None,
) -> xr.Dataset:
    """Entropy profile over classes of every image, after every block.

    Args:
        lm: An image classifier from :func:`entropy_lens.load_model` (``lm.readout`` set).
        images: ``N`` images, encoded bytes or PIL images.
        prompt_ids: Stable ids (default ``i0000``...).
        references: Where each image came from (the store's ``prompt_text``; default the ids).
        lens: Nucleus mass, Rényi orders and memory budget.
        batch_size: Images per forward pass.
        progress: Called with the number of images finished after each batch.

    Returns:
        A dataset following :mod:`entropy_lens.store.schema` with dims
        ``(prompt, token, layer, alpha)``, ``token`` of length 1.

    Raises:
        ValueError: for a model that is not an image classifier, no images, or ids of the
            wrong number.
    """
    lens = lens or LensSettings()
    ids, refs = _check_images(lm, images, prompt_ids, references, batch_size)
    buf = ProfileBuffers(len(images), 1, lm.n_layers, len(lens.alphas))
    for start in range(0, len(images), batch_size):
        rows = np.arange(start, min(start + batch_size, len(images)))
        resid, logits = classify_with_readouts(lm, pixel_values(lm, [images[r] for r in rows]))
        buf.put(rows, 0, decode_residuals(lm, resid, lens))
        buf.arrays[schema.TOKEN_ID][rows, 0] = logits.argmax(-1).cpu().numpy()
        if progress is not None:
            progress(len(rows))
    attrs = profile_attrs(lm, lens, ONE_PASS, chat_template=False)
    return build_dataset(buf.arrays, ids, refs, lm.n_layers, lens.alphas, attrs)


def _check_images(lm, images, prompt_ids, references, batch_size) -> tuple[list[str], list[str]]:
    if lm.readout is None:
        raise ValueError(f"model {lm.name!r} is a causal LM, not an image classifier; profile text prompts with it")
    if isinstance(images, (bytes, str)) or not len(images):
        raise ValueError("images must be a non-empty list of encoded images or PIL images")
    if not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    ids = [str(i) for i in prompt_ids] if prompt_ids is not None else [f"i{i:04d}" for i in range(len(images))]
    refs = [str(r) for r in references] if references is not None else list(ids)
    if len(ids) != len(images) or len(set(ids)) != len(ids) or len(refs) != len(images):
        raise ValueError(f"prompt_ids and references must hold {len(images)} values (ids distinct)")
    return ids, refs
