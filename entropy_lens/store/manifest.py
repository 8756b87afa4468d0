"""What a results folder must hold: the manifest a run writes, read by ``entropy-lens verify``.

A run lists every artifact its configuration makes (stores, tables, figures) in ``tables/manifest.json``
under its results folder, paths relative to that folder. ``verify`` then names each one that is missing,
and refuses a folder that holds no manifest: it is not a results folder of a run (an empty folder, a
folder of input files), and reading it as one would call it whole or its inputs damaged.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

# Where the manifest lies, relative to the results folder (tables/ is a folder DVC versions).
MANIFEST = Path("tables") / "manifest.json"
MANIFEST_VERSION = 1


def write_manifest(path: str | os.PathLike, outputs: Iterable[str], results: str = "results") -> Path:
    """Write the manifest of a run: ``outputs`` (paths under ``results``, as the workflow names them).

    Raises:
        ValueError: naming an output that does not lie under ``results``.
    """
    prefix = f"{results.rstrip('/')}/"
    outside = [out for out in outputs if not str(out).startswith(prefix)]
    if outside:
        raise ValueError(f"manifest outputs {outside} do not lie under {results!r}; list only results of the run")
    relative = sorted({str(out)[len(prefix) :] for out in outputs})
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    record = {"version": MANIFEST_VERSION, "results": results, "outputs": relative}
    target.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return target


def read_manifest(root: str | os.PathLike) -> dict:
    """The manifest of the results folder ``root``.

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
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(
            f"{path} is damaged ({type(err).__name__}: {err}); rebuild it: snakemake --force {path}"
        ) from err
    return {"results": str(record.get("results", "results")), "outputs": outputs}
