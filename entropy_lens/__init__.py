"""Entropy-Lens: per-layer entropy profiles of frozen decoder-only language models.

The public API::

    from entropy_lens import load_model, extract_profiles
    lm = load_model("smollm2-135m")
    ds = extract_profiles(lm, ["Once upon a time"], max_new_tokens=8)
"""

__version__ = "0.1.0"

from entropy_lens.lens import extract_profiles
from entropy_lens.models import REGISTRY, LensModel, load_model, materialize_model

__all__ = ["REGISTRY", "LensModel", "__version__", "extract_profiles", "load_model", "materialize_model"]
