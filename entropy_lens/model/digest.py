"""Content hashes of model sources: the provenance of a local folder or GGUF file, and its rerun trigger.

A registry model is pinned by its package's checksum and a hub model by its revision; a local folder or
``.gguf`` file is whatever bytes are there today. :func:`source_sha256` hashes them (weights, config,
tokenizer: every file of the folder), so that stores record which bytes were read and the workflow reruns
a model's jobs when they change. Hashing gigabytes on every dry run would be slow, so per-file hashes are
kept in a small JSON cache keyed by path, size and modification time: a file is hashed again only when it
changes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)

# Files of a model folder that are not the model: the provenance record materialization writes beside it.
IGNORED_FILES = frozenset({"entropy_lens_source.json"})


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def model_files(folder: str | os.PathLike) -> list[Path]:
    """Every file of a model folder (weights, config, tokenizer), relative, sorted; hidden files and the
    provenance record left out."""
    root = Path(folder)
    files = [p.relative_to(root) for p in root.rglob("*") if p.is_file()]
    return sorted(p for p in files if not any(part.startswith(".") for part in p.parts) and p.name not in IGNORED_FILES)


def source_sha256(path: str | os.PathLike, cache: str | os.PathLike | None = None) -> str:
    """Hex sha256 of a model file, or of a folder's files (each file's relative path and sha256, in order).

    Args:
        path: A ``.gguf`` (or any) file, or a model folder.
        cache: A JSON file of per-file hashes by path, size and mtime; read and updated when given.

    Raises:
        FileNotFoundError: when ``path`` does not exist.
    """
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"model source {root} does not exist: nothing to hash")
    known = _read_cache(cache)
    if root.is_file():
        digest = _cached(root, known)
    else:
        lines = [f"{rel.as_posix()}\0{_cached(root / rel, known)}\n" for rel in model_files(root)]
        digest = hashlib.sha256("".join(lines).encode()).hexdigest()
    if cache is not None:
        _write_cache(Path(cache), known)
    return digest


def _cached(file: Path, known: dict[str, list]) -> str:
    stat = file.stat()
    key, stamp = str(file.resolve()), [stat.st_size, stat.st_mtime_ns]
    if known.get(key, [None])[:2] != stamp:
        logger.info("hashing %s (%d bytes)", file, stat.st_size)
        known[key] = [*stamp, sha256_file(file)]
    return known[key][2]


def _read_cache(cache: str | os.PathLike | None) -> dict[str, list]:
    if cache is None or not Path(cache).is_file():
        return {}
    try:
        data = json.loads(Path(cache).read_text(encoding="utf-8"))
    except (ValueError, OSError):  # a torn or foreign file: hash again
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(cache: Path, known: dict[str, list]) -> None:
    cache.parent.mkdir(parents=True, exist_ok=True)
    staged = cache.with_name(f".{cache.name}.{os.getpid()}")
    staged.write_text(json.dumps(known, sort_keys=True), encoding="utf-8")
    staged.replace(cache)
