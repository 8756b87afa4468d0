"""Entropy-Lens: per-layer entropy profiles of frozen decoder-only language models.

The public API::

    from entropy_lens import load_model, extract_profiles
    lm = load_model("smollm2-135m")
    ds = extract_profiles(lm, ["Once upon a time"], max_new_tokens=8)

The names below are imported on first use, so that ``import entropy_lens.prompts.datasets`` or an
analysis job does not pay for importing torch and transformers.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "extract_profiles": "entropy_lens.lens.logit_lens",
    "REGISTRY": "entropy_lens.model.registry",
    "LensModel": "entropy_lens.model.loading",
    "load_model": "entropy_lens.model.loading",
    "materialize_model": "entropy_lens.model.loading",
}
__all__ = ["REGISTRY", "LensModel", "__version__", "extract_profiles", "load_model", "materialize_model"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'entropy_lens' has no attribute {name!r}")
