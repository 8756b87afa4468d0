"""Loading a model for the lens: from a registry name, a hub id, a local folder or a GGUF file, with the device
and dtype it runs in, and materializing registry models once into a local folder.

What a loaded model is (:class:`~entropy_lens.model.lens_model.LensModel` and its lens parts) is
:mod:`entropy_lens.model.lens_model`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import import_module, metadata
from pathlib import Path

import torch

from entropy_lens.model.digest import sha256_file, source_sha256
from entropy_lens.model.hub import hub_offline, missing_model_error, missing_model_files, probe_hub
from entropy_lens.model.lens_model import LensModel, wrap_model
from entropy_lens.model.registry import (
    FOLDER_SOURCE,
    GGUF_SOURCE,
    REGISTRY,
    REGISTRY_SOURCE,
    ModelSpec,
    PackageAssembly,
    PackageFile,
    source_kind,
)
from entropy_lens.model.vision import ClassNames, is_image_classifier

logger = logging.getLogger(__name__)

SOURCE_FILE = "entropy_lens_source.json"


def default_device() -> str:
    """``"cuda"`` when a GPU is visible, else ``"cpu"``."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def default_dtype(device: str) -> torch.dtype:
    """bf16 weights on GPUs, float32 on CPUs (the lens math is float32 either way)."""
    return torch.bfloat16 if str(device).startswith("cuda") else torch.float32


# bfloat16 where it is fast (a GPU, or a CPU with AVX512-BF16 or AMX), float32 elsewhere: on an AVX2-only CPU
# bfloat16 matmuls run in software, several times slower than float32 (the study's 1.5B model on such a host).
WHERE_FAST = "bfloat16_where_fast"


def resolve_dtype(dtype: str | torch.dtype | None, device: str) -> torch.dtype:
    """Turn ``"bfloat16"``/``"float32"``/``"float16"``/:data:`WHERE_FAST`/``None`` into a torch dtype."""
    if dtype is None or dtype == "auto":
        return default_dtype(device)
    if dtype == WHERE_FAST:
        fast = str(device).startswith("cuda") or cpu_has_bf16_matmul()
        return torch.bfloat16 if fast else torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    table = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
    if dtype not in table:
        raise ValueError(f"dtype must be one of {sorted(table)}, 'auto' or {WHERE_FAST!r}, got {dtype!r}")
    return table[dtype]


def cpu_has_bf16_matmul() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AVX512-BF16 or AMX), as torch reports it."""
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


def load_model(
    name_or_path: str | os.PathLike | torch.nn.Module,
    *,
    tokenizer: object | None = None,
    device: str | None = None,
    dtype: str | torch.dtype | None = None,
    family: str | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> LensModel:
    """Load a model for the lens from a registry name, hub id, local folder or ``.gguf``, or take one already in
    memory.

    Registry models are materialized once (dequantized safetensors + tokenizer) into
    ``cache_dir`` (default ``$ENTROPY_LENS_CACHE`` or ``~/.cache/entropy_lens/models``)
    and reloaded from there in about a second.

    Args:
        name_or_path: A :data:`REGISTRY` name, a hub id ``org/name``, a folder saved with
            ``save_pretrained`` (e.g. by :func:`materialize_model`) or a ``.gguf`` file; or a Hugging Face
            causal LM (or image classifier) already loaded, with its ``tokenizer`` (nnsight: ``lm._model`` and
            ``lm.tokenizer``).
        tokenizer: The tokenizer (or image processor) of a model passed in memory; only then.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``...; default: a GPU if visible (a model in memory: where it is).
        dtype: Weight dtype; default bf16 on GPU, float32 on CPU (a model in memory: as it is).
        family: Family label to record; defaults to the registry's or the folder's.
        cache_dir: Where registry models are materialized.

    Raises:
        ValueError: for a name that is neither in the registry, a path, nor ``org/name``; a model in memory
            without its tokenizer, or a tokenizer beside a name.
    """
    if isinstance(name_or_path, torch.nn.Module):
        return _in_memory(name_or_path, tokenizer, device, dtype, family)
    if tokenizer is not None:
        raise ValueError(
            f"tokenizer= goes with a model object already in memory, not with {str(name_or_path)!r}, whose own "
            "tokenizer is loaded with it; pass the model object, or leave tokenizer out"
        )
    device = device or default_device()
    torch_dtype = resolve_dtype(dtype, device)
    if device == "cpu" and torch_dtype == torch.bfloat16 and not cpu_has_bf16_matmul():
        logger.warning(
            "bfloat16 weights on a CPU without AVX512-BF16 or AMX (%s): its matmuls run without hardware support, "
            "an order of magnitude slower than float32 here (measured: 13-17 s against about 1.5 s per MMLU prompt "
            "of Qwen2.5-Coder-1.5B); set compute.dtype: float32 or bfloat16_where_fast, or run where the CPU has them",
            torch.backends.cpu.get_cpu_capability(),
        )
    name = str(name_or_path)
    kind = source_kind(name)
    if kind == REGISTRY_SOURCE:
        folder = Path(cache_dir or default_cache_dir()) / name
        _materialize_once(name, folder)
        return _load_folder(folder, name, device, torch_dtype, family)
    path = Path(name).expanduser()
    if kind == GGUF_SOURCE:
        return _load_gguf(path, name, device, torch_dtype, family)
    if kind == FOLDER_SOURCE:
        return _load_folder(path, name, device, torch_dtype, family)
    return _load_hub(name, device, torch_dtype, family)


def _in_memory(
    model: torch.nn.Module, tokenizer: object | None, device: str | None, dtype: str | torch.dtype | None, family
) -> LensModel:
    """A model object and its tokenizer, moved to ``device`` and cast to ``dtype`` where given."""
    config = getattr(model, "config", None)
    if config is None:
        raise ValueError(
            f"load_model takes a Hugging Face model object (a PreTrainedModel with a config), got "
            f"{type(model).__name__}; for a TransformerLens HookedTransformer, load its Hugging Face name instead"
        )
    if tokenizer is None:
        raise ValueError(
            f"a model in memory ({type(model).__name__}) needs its tokenizer: load_model(model, tokenizer=tokenizer)"
        )
    if device is not None:
        model = model.to(device)
    if dtype is not None:
        model = model.to(resolve_dtype(dtype, str(next(model.parameters()).device)))
    name = str(getattr(config, "_name_or_path", "") or type(model).__name__)
    revision = str(getattr(config, "_commit_hash", None) or "")
    return wrap_model(model, tokenizer, name=name, source=f"memory:{name}", sha256=revision, family=family or "unknown")


def default_cache_dir() -> Path:
    """The folder registry models are materialized into when no ``cache_dir`` is given."""
    env = os.environ.get("ENTROPY_LENS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "entropy_lens" / "models"


def _auto_classes(source: str | os.PathLike | None = None, **hub: bool):
    """The auto classes of a model and its preprocessor: an image classifier (decided by its config)
    loads with its image processor, anything else as a causal LM with its tokenizer (``hub``: arguments of
    ``from_pretrained``, e.g. ``local_files_only``)."""
    from transformers import (
        AutoConfig,
        AutoImageProcessor,
        AutoModelForCausalLM,
        AutoModelForImageClassification,
        AutoTokenizer,
    )

    if source is not None and is_image_classifier(AutoConfig.from_pretrained(source, **hub)):
        return AutoModelForImageClassification, AutoImageProcessor
    return AutoModelForCausalLM, AutoTokenizer


def _load_folder(folder: Path, name: str, device: str, dtype: torch.dtype, family: str | None) -> LensModel:
    auto_model, auto_tok = _auto_classes(folder)
    meta = read_source(folder)
    model = auto_model.from_pretrained(folder, dtype=dtype).to(device)
    tokenizer = auto_tok.from_pretrained(folder)
    return wrap_model(
        model,
        tokenizer,
        name=name,
        source=meta.get("source", str(folder)),
        # a folder materialization wrote records its source's hash; any other folder is hashed as it is
        sha256=meta.get("sha256", "") if meta else source_sha256(folder),
        family=family or meta.get("family", "unknown"),
    )


def _load_gguf(path: Path, name: str, device: str, dtype: torch.dtype, family: str | None) -> LensModel:
    auto_model, auto_tok = _auto_classes()
    logger.info("parsing GGUF %s (slow: materialize it once to reload fast)", path.name)
    with one_gguf_parse():
        tokenizer = auto_tok.from_pretrained(path.parent, gguf_file=path.name)
        model = auto_model.from_pretrained(path.parent, gguf_file=path.name, dtype=dtype).to(device)
    return wrap_model(
        model, tokenizer, name=name, source=str(path), sha256=sha256_file(path), family=family or "unknown"
    )


@contextmanager
def one_gguf_parse() -> Iterator[dict[str, object]]:
    """Within the block, each GGUF file is parsed once.

    transformers parses a GGUF file's header anew for its config, its tokenizer and its weights; with a
    262k-token vocabulary in the header, each parse builds millions of small fields (Gemma-3-270M: three
    parses, 121 of the 183 s of a profiled materialization). The reader only reads its memory map, so one
    reader per file serves all three. Yields the readers by resolved path; the library's own reader class
    is back in place on exit, also on error.
    """
    import gguf

    original = gguf.GGUFReader
    readers: dict[str, object] = {}

    def shared(path: str | os.PathLike, *args: object, **kwargs: object) -> object:
        key = os.path.realpath(path)
        if key not in readers:
            readers[key] = original(path, *args, **kwargs)
        return readers[key]

    gguf.GGUFReader = shared
    try:
        yield readers
    finally:
        gguf.GGUFReader = original


def _load_hub(hub_id: str, device: str, dtype: torch.dtype, family: str | None) -> LensModel:
    """A hub model: a whole cached snapshot is read with no network at all; one that is missing fails at once in
    one line offline, and online only after one request without retries found the hub (then it downloads)."""
    cached = not missing_model_files(hub_id)
    if not cached:
        if hub_offline():
            raise missing_model_error(hub_id)
        probe_hub(hub_id)
    try:
        auto_model, auto_tok = _auto_classes(hub_id, local_files_only=cached)
        model = auto_model.from_pretrained(hub_id, dtype=dtype, local_files_only=cached)
        tokenizer = auto_tok.from_pretrained(hub_id, local_files_only=cached)
    except OSError as err:  # transformers' "not cached and not reachable" (also gated, unknown repo)
        raise missing_model_error(hub_id, err) from err
    model = model.to(device)
    revision = getattr(model.config, "_commit_hash", None) or ""
    return wrap_model(
        model, tokenizer, name=hub_id, source=f"hub:{hub_id}", sha256=revision, family=family or "unknown"
    )


def read_source(folder: str | os.PathLike) -> dict:
    """The provenance written by :func:`materialize_model` (empty for other folders)."""
    path = Path(folder) / SOURCE_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def gguf_from_registry(spec: ModelSpec, workdir: Path) -> Path:
    """Materialize the registry entry's GGUF file inside ``workdir`` and verify it."""
    src = spec.source
    try:
        if isinstance(src, PackageFile):
            return Path(metadata.distribution(src.distribution).locate_file(src.path))
        if isinstance(src, PackageAssembly):
            return Path(import_module(src.module).assemble(workdir / f"{spec.name}.gguf"))
        target = workdir / f"{spec.name}.gguf"
        with open(target, "wb") as out:
            for dist, rel in src.parts:
                with open(metadata.distribution(dist).locate_file(rel), "rb") as part:
                    shutil.copyfileobj(part, out, 1 << 20)
        return target
    except (metadata.PackageNotFoundError, ModuleNotFoundError, FileNotFoundError) as err:
        raise ValueError(f"model {spec.name!r} needs its PyPI package: {spec.install} ({err})") from err


def _materialize_once(name: str, folder: Path) -> None:
    """Materialize registry model ``name`` into ``folder`` unless it is there, under a file lock beside it: processes
    sharing one cache (parallel test workers, jobs on one node) wait for the first instead of replacing its copy
    while they read it."""
    from filelock import FileLock

    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder.parent / f".{folder.name}.lock")):
        if not (folder / SOURCE_FILE).exists():
            materialize_model(name, folder)


def materialize_model(name_or_path: str, out_dir: str | os.PathLike, *, family: str | None = None) -> Path:
    """Save a fast-loading copy (safetensors + tokenizer + provenance) into ``out_dir``.

    The copy is written to a temporary sibling folder and renamed into place, so
    ``out_dir`` either holds a whole model or does not exist.

    Raises:
        ValueError: when the source's sha256 differs from the registry's pin.
    """
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.") as tmp:
        work = Path(tmp)
        lm, meta = _load_for_materialize(str(name_or_path), work, family)
        staged = work / "model"
        _save_plain(lm, staged)
        (staged / SOURCE_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True))
        if out.exists():
            shutil.rmtree(out)
        staged.rename(out)
    logger.info("materialized %s into %s", name_or_path, out)
    return out


def _load_for_materialize(name: str, work: Path, family: str | None) -> tuple[LensModel, dict]:
    if name not in REGISTRY:
        lm = load_model(name, device="cpu", dtype="float32", family=family)
        return lm, {"source": lm.source, "sha256": lm.sha256, "family": lm.family, "name": name}
    spec = REGISTRY[name]
    gguf = gguf_from_registry(spec, work)
    digest = sha256_file(gguf)
    if spec.source.sha256 and digest != spec.source.sha256:
        raise ValueError(f"model {name!r}: {gguf.name} has sha256 {digest}, expected {spec.source.sha256}")
    lm = _load_gguf(gguf, name, "cpu", torch.float32, family or spec.family)
    meta = {
        "source": f"registry:{name} ({spec.install})",
        "sha256": digest,
        "family": family or spec.family,
        "name": name,
    }
    return lm, meta


def _save_plain(lm: LensModel, folder: Path) -> None:
    # save_pretrained refuses a GGUF-loaded model while its quantizer is attached.
    model = lm.model
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)


def load_tokenizer(name_or_path: str | os.PathLike):
    """The tokenizer of a model folder or hub id (e.g. to decode token ids of a store); for an image
    classifier, its class names (:class:`~entropy_lens.model.vision.ClassNames`), which decode class ids alike."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(name_or_path)
    if is_image_classifier(config):
        return ClassNames({int(k): str(v) for k, v in config.id2label.items()})
    _, auto_tok = _auto_classes()
    return auto_tok.from_pretrained(name_or_path)
