"""Shared fixtures: the real embedded model, materialized once per machine and reused."""

import os
from pathlib import Path

import pytest
from workflow_tiny import REPO


@pytest.fixture(scope="session")
def model_cache() -> Path:
    """Folder for materialized registry models (reused across runs; ignored by git)."""
    path = Path(os.environ.get("ENTROPY_LENS_CACHE", REPO / ".cache" / "models"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def smollm2(model_cache):
    """The real SmolLM2-135M-Instruct from its PyPI package (materialized on first use)."""
    from entropy_lens import load_model

    try:
        return load_model("smollm2-135m", device="cpu", cache_dir=model_cache)
    except ValueError as err:  # package not installed
        pytest.skip(f"smollm2-135m unavailable: {err}")
