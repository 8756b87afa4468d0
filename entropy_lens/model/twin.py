"""A model's random-init twin: the same architecture and tokenizer, every weight drawn anew from a fixed seed.

What training put into a model is what its twin lacks. The twin is built from the model's own ``config.json``
(read from its materialized folder, a hub id or any folder ``from_pretrained`` reads) by the architecture's own
initialiser (``from_config`` under a seeded generator: each class's ``_init_weights``), with embeddings tied
where the config ties them, and saved like any materialized model (safetensors, tokenizer or image processor,
generation config) with its provenance: ``twin_of``, the seed and ``init: "random init"``. Nothing here
branches on a model's name; the weights depend on the config and the seed alone, so the same seed writes the
same bytes. The generator is seeded from the seed through :func:`generator_seed` (a hash), never with the seed
itself: a model that is itself a random init from a small seed (the rehearsal's stand-ins, the tests' tiny
models) must not come back as its own twin, and :func:`build_twin` refuses a twin whose weights are its
source's.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

from entropy_lens.model.digest import source_sha256
from entropy_lens.model.loading import SOURCE_FILE, read_source
from entropy_lens.model.vision import is_image_classifier

logger = logging.getLogger(__name__)

TWIN_INIT = "random init"
# The provenance keys a twin's folder records beside a materialized model's (source, sha256, family, name).
TWIN_KEYS = ("twin_of", "twin_of_sha256", "seed", "init")


def generator_seed(seed: int) -> int:
    """The torch generator's seed of the twin drawn from ``seed``: 63 bits of a hash of it, so that no model
    initialised with ``torch.manual_seed(seed)`` itself is its own twin."""
    digest = hashlib.sha256(f"entropy-lens twin {int(seed)}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def twin_model(source: str | os.PathLike, seed: int):
    """The random-init twin of ``source``'s architecture, in memory, float32 on the CPU.

    Args:
        source: A model folder (a materialized model) or a hub id whose ``config.json`` is readable.
        seed: Seed of the weights; the global torch generator is left as it was.

    Returns:
        ``(model, preprocessor)``: the twin and the source's own tokenizer (or image processor).

    Raises:
        ValueError: for a negative or non-int seed.
    """
    import torch
    from transformers import (
        AutoConfig,
        AutoImageProcessor,
        AutoModelForCausalLM,
        AutoModelForImageClassification,
        AutoTokenizer,
    )

    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"a twin's seed must be an int >= 0, got {seed!r}")
    config = AutoConfig.from_pretrained(source)
    image = is_image_classifier(config)
    auto_model = AutoModelForImageClassification if image else AutoModelForCausalLM
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(generator_seed(seed))
        model = auto_model.from_config(config, dtype=torch.float32)
    preprocessor = (AutoImageProcessor if image else AutoTokenizer).from_pretrained(source)
    return model.eval(), preprocessor


def build_twin(source: str | os.PathLike, out_dir: str | os.PathLike, *, seed: int, name: str | None = None) -> Path:
    """Write the random-init twin of ``source`` into ``out_dir`` (see the module docstring).

    The folder is staged beside ``out_dir`` and renamed into place, so ``out_dir`` either holds a whole twin
    or does not exist. Its provenance (``entropy_lens_source.json``) keeps the source's family and name, so a
    twin profiles under the same labels as its model, and adds :data:`TWIN_KEYS`; its ``sha256`` is the
    twin's own content hash (weights, config, tokenizer).

    Args:
        source: The model's materialized folder (or a hub id).
        out_dir: Where the twin goes.
        seed: Seed of the weights.
        name: The model's configured name (default: the source's recorded name, else the folder's name).

    Returns:
        ``out_dir`` as a :class:`~pathlib.Path`.
    """
    from transformers import GenerationConfig

    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    model, preprocessor = twin_model(source, seed)
    if getattr(model, "generation_config", None) is not None:
        try:  # the model's own stopping tokens, so the twin generates as its model does
            model.generation_config = GenerationConfig.from_pretrained(source)
        except OSError:
            logger.info("%s has no generation_config.json: the twin keeps the config's", source)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.") as tmp:
        staged = Path(tmp) / "twin"
        model.save_pretrained(staged)
        preprocessor.save_pretrained(staged)
        _refuse_own_weights(source, staged, seed)
        meta = twin_provenance(source, staged, seed=seed, name=name)
        (staged / SOURCE_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True))
        if out.exists():
            shutil.rmtree(out)
        staged.rename(out)
    logger.info("wrote the seed-%d twin of %s into %s", seed, source, out)
    return out


def _refuse_own_weights(source: str | os.PathLike, staged: Path, seed: int) -> None:
    """Raise where the twin's weight files equal its source's: it would be its model, not a null for it."""
    weights = sorted(staged.glob("*.safetensors"))
    theirs = [Path(source) / w.name for w in weights]
    if weights and all(t.is_file() and t.read_bytes() == w.read_bytes() for w, t in zip(weights, theirs, strict=True)):
        raise ValueError(
            f"the seed-{seed} twin of {source} has its model's own weights (the model is itself this random init): "
            "set twins.seed to another value"
        )


def twin_provenance(source: str | os.PathLike, folder: Path, *, seed: int, name: str | None) -> dict[str, object]:
    """The provenance of a twin written into ``folder``: what it is a twin of, and its own content hash."""
    origin = read_source(source) if Path(source).is_dir() else {}
    fallback = Path(str(source)).name
    return {
        "name": name or origin.get("name", fallback),
        "family": origin.get("family", "unknown"),
        "source": f"twin of {origin.get('source', str(source))}",
        "sha256": source_sha256(folder),
        "twin_of": name or origin.get("name", fallback),
        "twin_of_sha256": origin.get("sha256") or (source_sha256(source) if Path(source).is_dir() else ""),
        "seed": int(seed),
        "init": TWIN_INIT,
    }


def is_twin(folder: str | os.PathLike) -> bool:
    """Whether a model folder holds a random-init twin (its provenance says so)."""
    return read_source(folder).get("init") == TWIN_INIT
