"""Tensor artifacts (safetensors files, e.g. a fitted lens) that refuse a flipped byte.

Safetensors carries no checksum, so a damaged copy of a lens would load as wrong numbers. Every file written
here records in its metadata (``entropy_lens_sha256``) the SHA-256 of what it holds: the other metadata, each
tensor's name, dtype and shape, and its bytes. :func:`load_tensors` recomputes it from what it read, so a
flipped byte anywhere (data, offsets, metadata) or a truncated file is refused, naming the file and the
remedy.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

import torch

DIGEST_KEY = "entropy_lens_sha256"
_HEADER_BYTES = 8  # safetensors: a little-endian u64 header length, the JSON header, then the data


class DamagedTensorsError(ValueError):
    """A safetensors artifact whose header, length or data checksum is wrong."""


def save_tensors(tensors: Mapping[str, torch.Tensor], path: str | os.PathLike, metadata: Mapping[str, str]) -> Path:
    """Write ``tensors`` with ``metadata`` and their checksum, atomically (temporary sibling, then rename)."""
    from safetensors.torch import save

    if DIGEST_KEY in metadata:
        raise ValueError(f"metadata key {DIGEST_KEY!r} is reserved for the checksum")
    tensors = {key: value.contiguous().cpu() for key, value in tensors.items()}
    blob = save(tensors, metadata={**metadata, DIGEST_KEY: content_digest(tensors, metadata)})
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(blob)
    os.replace(tmp, path)
    return path


def load_tensors(path: str | os.PathLike) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """``(tensors, metadata)`` of a file :func:`save_tensors` wrote, checked against its checksum.

    Raises:
        DamagedTensorsError: naming the file, what is wrong and the remedy.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load

    raw = Path(path).read_bytes()
    remedy = f"rebuild it (snakemake --force {path}) or dvc pull its folder"
    try:
        metadata = dict(_header(raw).get("__metadata__") or {})
        expected = metadata.pop(DIGEST_KEY, None)
        if expected is None:
            raise DamagedTensorsError("it records no checksum")
        tensors = load(raw)
        if content_digest(tensors, metadata) != expected:
            raise DamagedTensorsError("what it holds does not match the checksum it recorded")
    except (DamagedTensorsError, SafetensorError, ValueError, RuntimeError) as err:
        raise DamagedTensorsError(f"tensor file {path} is damaged: {err}; {remedy}") from None
    return tensors, metadata


def content_digest(tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str]) -> str:
    """SHA-256 (hex) of the metadata, each tensor's name, dtype and shape, and its bytes (names in order)."""
    digest = hashlib.sha256()
    layout = {name: [str(t.dtype), list(t.shape)] for name, t in tensors.items()}
    digest.update(json.dumps({"metadata": dict(metadata), "tensors": layout}, sort_keys=True).encode())
    for name in sorted(tensors):
        digest.update(tensors[name].contiguous().cpu().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _header(raw: bytes) -> dict:
    """The JSON header of safetensors bytes."""
    if len(raw) < _HEADER_BYTES:
        raise DamagedTensorsError(f"{len(raw)} bytes are too short for a safetensors file")
    size = int.from_bytes(raw[:_HEADER_BYTES], "little")
    if _HEADER_BYTES + size > len(raw):
        raise DamagedTensorsError(f"its header claims {size} bytes, more than the file holds")
    try:
        header = json.loads(raw[_HEADER_BYTES : _HEADER_BYTES + size])
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DamagedTensorsError(f"its header is not JSON ({err})") from None
    if not isinstance(header, dict):
        raise DamagedTensorsError("its header is not a JSON object")
    return header
