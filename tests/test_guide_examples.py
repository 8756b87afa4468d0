"""The guide's Python examples run as written: every ```python block of docs/guide.md, in order, in one
namespace, from a working directory laid out as after ``make run`` (the real SmolLM2 materialized under
resources/models, an image file), with the hub read offline from stand-ins of the models it names."""

from __future__ import annotations

import importlib.util
import io
import re
from pathlib import Path

import pytest
from workflow_tiny import REPO

GUIDE = REPO / "docs" / "guide.md"
_spec = importlib.util.spec_from_file_location("rehearsal_cache", REPO / "scripts" / "rehearsal_cache.py")
cache = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cache)


def python_blocks(path: Path) -> list[str]:
    """The code of every ```python block of a Markdown file, in order."""
    return re.findall(r"^```python\n(.*?)^```", path.read_text(encoding="utf-8"), flags=re.S | re.M)


def _hub_ids(code: str) -> set[str]:
    return {hub_id for hub_id in re.findall(r'load_model\("([\w.-]+/[\w.-]+)"\)', code)}


@pytest.fixture
def after_make_run(smollm2, model_cache, tmp_path, monkeypatch):
    """cwd with resources/models/smollm2-135m and cat.jpg; registry models from the test cache; the hub offline
    on stand-ins of every hub id the examples load."""
    from huggingface_hub import constants
    from PIL import Image

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ENTROPY_LENS_CACHE", str(model_cache))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    (tmp_path / "resources" / "models").mkdir(parents=True)
    (tmp_path / "resources" / "models" / "smollm2-135m").symlink_to(model_cache / "smollm2-135m")
    buffer = io.BytesIO()
    Image.new("RGB", (48, 48), (200, 120, 40)).save(buffer, format="JPEG")
    (tmp_path / "cat.jpg").write_bytes(buffer.getvalue())
    hub = tmp_path / "hub"
    texts = cache.story_texts(64, 7)
    tok = cache.tokenizer(texts)
    shipped = cache.hub_models({"models": {h: {"source": h} for h in _hub_ids("".join(python_blocks(GUIDE)))}})
    for hub_id, fields in shipped.items():
        cache.write_model(hub, hub_id, fields, tok)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return tmp_path


def test_the_guide_has_the_examples_this_test_prepares_for():
    blocks = python_blocks(GUIDE)
    assert len(blocks) >= 3
    assert _hub_ids("".join(blocks)) == {"google/vit-base-patch16-224"}


@pytest.mark.slow
def test_every_python_example_of_the_guide_runs_as_written(after_make_run):
    import matplotlib

    matplotlib.use("Agg")
    namespace: dict = {}
    for number, code in enumerate(python_blocks(GUIDE), start=1):
        try:
            exec(compile(code, f"docs/guide.md python block {number}", "exec"), namespace)
        except Exception as err:  # any error of an example is the failure this test reports
            pytest.fail(f"docs/guide.md python block {number} fails as written: {type(err).__name__}: {err}")
    assert namespace["ds"].sizes["token"] == 1  # the last example read images: one slot per image
