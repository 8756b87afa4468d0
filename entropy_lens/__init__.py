"""Entropy-Lens: per-layer entropy profiles of frozen decoder-only language models.

The public API::

    from entropy_lens import GenerationSettings, LensSettings, extract_profiles, load_model
    lm = load_model("smollm2-135m")
    ds = extract_profiles(lm, ["Once upon a time"], max_new_tokens=8)
    ds = extract_profiles(lm, ["Once upon a time"], generation=GenerationSettings(8), lens=LensSettings(top_p=0.6))

The package's folders are its layers, lowest first: ``core``, ``store``, ``model``, ``prompts``,
``lens``, ``answers``, ``analysis``, ``verdicts``, ``workflow``; ``cli`` and ``plots`` face the user.  A module
imports only its own layer and those below it (docs/architecture.md).

The names below are imported on first use, so that ``import entropy_lens.prompts.datasets`` or an
analysis job does not pay for importing torch and transformers.
"""

from __future__ import annotations

import importlib
from typing import Any

from entropy_lens.core.version import __version__

_LAZY = {
    "extract_profiles": "entropy_lens.lens.text",
    "LensSettings": "entropy_lens.lens.decoding",
    "GenerationSettings": "entropy_lens.model.generation",
    "REGISTRY": "entropy_lens.model.registry",
    "LensModel": "entropy_lens.model.loading",
    "load_model": "entropy_lens.model.loading",
    "materialize_model": "entropy_lens.model.loading",
}
__all__ = [
    "REGISTRY",
    "GenerationSettings",
    "LensModel",
    "LensSettings",
    "__version__",
    "extract_profiles",
    "load_model",
    "materialize_model",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'entropy_lens' has no attribute {name!r}")
