"""What a results folder must hold: the manifest a run writes, read by ``entropy-lens verify``.

A run lists every artifact its configuration makes (stores, tables, figures) in ``tables/manifest.json``
under its results folder, paths relative to that folder. ``verify`` then names each one that is missing,
and refuses a folder that holds no manifest: it is not a results folder of a run (an empty folder, a
folder of input files), and reading it as one would call it whole or its inputs damaged.

The manifest is written last, once every artifact it lists exists, and records the sha256 of every file under
the results folder that is not inside a store (tables, prompt sets, fitted lenses, figures; stores carry a
checksum per chunk): a table edited afterwards, even to a well-formed one, is named by ``verify`` without DVC.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

# Where the manifest lies, relative to the results folder (tables/ is a folder DVC versions).
MANIFEST = Path("tables") / "manifest.json"
# 2: adds the sha256 of every file outside the stores (``hashes``); a version 1 manifest lists outputs only.
MANIFEST_VERSION = 2
STORE_SUFFIX = ".zarr"
# Folders of the results whose files are no artifact of the values: each job's measured time and memory.
UNHASHED_FOLDERS = frozenset({"benchmarks"})
# Files Snakemake leaves inside directory outputs: not artifacts.
SNAKEMAKE_MARKERS = frozenset({".snakemake_timestamp"})
# What git and DVC keep beside the artifacts (``results/<folder>.dvc``, the ``.gitignore`` that ``dvc add`` writes):
# written after the run, rewritten by every push.
BOOKKEEPING_NAMES, BOOKKEEPING_SUFFIX = frozenset({".gitignore"}), ".dvc"


def write_manifest(path: str | os.PathLike, outputs: Iterable[str], results: str = "results") -> Path:
    """Write the manifest of a run: ``outputs`` (paths under ``results``, as the workflow names them) and the
    sha256 of every file under the results folder (:func:`hashed_files`) as it is now.

    Raises:
        ValueError: naming an output that does not lie under ``results``.
    """
    prefix = f"{results.rstrip('/')}/"
    outside = [out for out in outputs if not str(out).startswith(prefix)]
    if outside:
        raise ValueError(f"manifest outputs {outside} do not lie under {results!r}; list only results of the run")
    relative = sorted({str(out)[len(prefix) :] for out in outputs})
    target = Path(path)
    root = _results_root(target)
    hashes = {file.relative_to(root).as_posix(): file_sha256(file) for file in hashed_files(root)}
    target.parent.mkdir(parents=True, exist_ok=True)
    record = {"version": MANIFEST_VERSION, "results": results, "outputs": relative, "hashes": hashes}
    target.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return target


def _results_root(manifest: Path) -> Path:
    """The results folder a manifest at ``manifest`` describes (``<root>/tables/manifest.json``)."""
    return manifest.parents[len(MANIFEST.parts) - 1]


def hashed_files(root: str | os.PathLike) -> Iterator[Path]:
    """Every file under ``root`` whose hash the manifest records: all but the manifest itself, the files inside
    stores (checked chunk by chunk), the benchmark folder (timings), Snakemake's markers and what git and DVC keep
    beside the artifacts; sorted."""
    base = Path(root)
    for path in sorted(base.rglob("*")):
        parts = path.relative_to(base).parts
        if (
            path.is_file()
            and path.name not in SNAKEMAKE_MARKERS | BOOKKEEPING_NAMES
            and path.suffix != BOOKKEEPING_SUFFIX
            and Path(*parts) != MANIFEST
            and parts[0] not in UNHASHED_FOLDERS
            and not any(part.endswith(STORE_SUFFIX) for part in parts[:-1])
        ):
            yield path


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes (hex), read in blocks of 1 MiB."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_manifest(root: str | os.PathLike) -> dict:
    """The manifest of the results folder ``root``: ``results``, ``outputs`` and ``hashes`` (empty for a manifest
    of version 1, which recorded none).

    Raises:
        ValueError: in one line, when ``root`` holds no manifest (not a results folder) or an unreadable one.
    """
    path = Path(root) / MANIFEST
    if not path.is_file():
        raise ValueError(
            f"{root} is not a results folder of a run: it holds no {MANIFEST.as_posix()} (the list of what the run "
            "writes); give the results folder of a run (default: results), or run the workflow, which writes it "
            f"(a run made before manifests: snakemake results/{MANIFEST.as_posix()})"
        )
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        outputs = [str(out) for out in record["outputs"]]
        hashes = {str(name): str(digest) for name, digest in record.get("hashes", {}).items()}
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(
            f"{path} is damaged ({type(err).__name__}: {err}); rebuild it: snakemake --force {path}"
        ) from err
    return {"results": str(record.get("results", "results")), "outputs": outputs, "hashes": hashes}
