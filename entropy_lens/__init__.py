"""Entropy-Lens: per-layer entropy profiles of frozen decoder-only language models.

The public API::

    from entropy_lens import GenerationSettings, LensSettings, PromptSettings, extract_profiles, load_model
    lm = load_model("smollm2-135m")
    ds = extract_profiles(lm, ["Once upon a time"], generation=GenerationSettings(8))
    generation, lens, prompting = GenerationSettings(8), LensSettings(top_p=0.6), PromptSettings(batch_size=2)
    ds = extract_profiles(lm, ["Once", "The cat"], generation=generation, lens=lens, prompting=prompting)

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
    "PromptSettings": "entropy_lens.lens.encoding",
    "GenerationSettings": "entropy_lens.model.generation",
    "REGISTRY": "entropy_lens.model.registry",
    "LensModel": "entropy_lens.model.lens_model",
    "load_model": "entropy_lens.model.loading",
    "materialize_model": "entropy_lens.model.loading",
}
__all__ = [
    "REGISTRY",
    "GenerationSettings",
    "LensModel",
    "LensSettings",
    "PromptSettings",
    "__version__",
    "extract_profiles",
    "load_model",
    "materialize_model",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'entropy_lens' has no attribute {name!r}")
