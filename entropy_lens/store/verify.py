"""Is a results folder whole? Everything the run's manifest lists present, every store read to its last
chunk, every table parsed, every file checked against the hash DVC recorded for it.

After a ``dvc pull``, a copy between machines or a crash mid-write, :func:`verify` says in one pass
which artifacts are damaged and how to get each back; ``entropy-lens verify [DIR]`` prints it and
exits 0 only when everything is whole.

* **The manifest** (``tables/manifest.json``, :mod:`entropy_lens.store.manifest`): every store, table and
  figure the run's configuration makes must be there, and every file outside the stores must still have the
  sha256 the run recorded when it wrote it (a table edited into another well-formed table is named, DVC or
  not); a folder without one is no results folder and is refused.
* **Stores** (``*.zarr``): opened against the schema, every chunk file present, and every array read, so
  each chunk's CRC-32C (:mod:`entropy_lens.store.storage`) is checked; a store written before chunks carried
  checksums, or before every chunk was written (where a missing chunk reads as the fill value), is read
  too, and reported as unprotected.
* **Tables**: CSV files must end with a newline and give every row the header's number of fields (a
  truncated copy does not); Parquet files must read whole.
* **Tensor files** (``*.safetensors``, e.g. fitted lenses): read against the checksum they record
  (:mod:`entropy_lens.store.tensors`).
* **DVC**: where a folder is tracked (``results/<name>.dvc``) and its manifest is in the local DVC
  cache, every file's MD5 must match the recorded one.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import xarray as xr
import yaml
import zarr

from entropy_lens.core.tables import check_csv
from entropy_lens.store import storage
from entropy_lens.store.manifest import MANIFEST, SNAKEMAKE_MARKERS, file_sha256, read_manifest
from entropy_lens.store.tensors import DamagedTensorsError, load_tensors

STORE_SUFFIX = ".zarr"
# Tables and tensor files: each read whole and checked.
TABLE_SUFFIXES = (".csv", ".parquet", ".safetensors")
CHECKSUM_CODEC = "crc32c"
IGNORED = SNAKEMAKE_MARKERS


@dataclass(frozen=True)
class Finding:
    """One artifact's state: ``damaged`` (with the remedy) or ``unprotected`` (whole, but unchecksummed)."""

    path: str
    state: str
    why: str
    remedy: str = ""

    def line(self) -> str:
        text = f"{self.state.upper()} {self.path}: {self.why}"
        return f"{text}; {self.remedy}" if self.remedy else text


@dataclass(frozen=True)
class Report:
    """What :func:`verify` checked and found."""

    stores: int
    tables: int
    hashed: int
    findings: tuple[Finding, ...]
    recorded: int = 0

    @property
    def whole(self) -> bool:
        return not any(f.state == "damaged" for f in self.findings)

    def summary(self) -> str:
        damaged = sum(f.state == "damaged" for f in self.findings)
        checked = (
            f"{self.stores} stores, {self.tables} tables and tensor files, {self.recorded} files against the run's "
            f"hashes, {self.hashed} files against DVC hashes"
        )
        missing = sum(f.state == "damaged" and f.why.startswith("missing") for f in self.findings)
        of_which = f" ({missing} of them missing)" if missing else ""
        return f"{checked}: " + ("all whole" if damaged == 0 else f"{damaged} damaged{of_which}")


def verify(root: str | os.PathLike, progress: Callable[[str], None] | None = None) -> Report:
    """Check every store and table under ``root`` and, where DVC tracks them, every file's hash.

    Raises:
        FileNotFoundError: when ``root`` is not a folder.
        ValueError: when ``root`` holds no manifest of a run (it is not a results folder).
    """
    base = Path(root)
    if not base.is_dir():
        raise FileNotFoundError(f"no results folder at {base}")
    manifest = read_manifest(base)
    findings = _missing_outputs(base, manifest)
    stores = sorted(_stores(base))
    for store in stores:
        if progress:
            progress(str(store))
        findings += _check_store(store)
    tables = sorted(p for p in base.rglob("*") if p.suffix in TABLE_SUFFIXES and not _inside_store(p, base))
    for table in tables:
        findings += _check_table(table)
    findings += _recorded_hashes(base, manifest)
    hashed, mismatches = _check_dvc(base)
    return Report(len(stores), len(tables), hashed, tuple(findings + mismatches), len(manifest["hashes"]))


def _missing_outputs(base: Path, manifest: dict) -> list[Finding]:
    """A damaged finding for every output the manifest lists that is not there."""
    return [
        Finding(str(base / out), "damaged", "missing (the run's manifest lists it)", _missing_remedy(manifest, out))
        for out in manifest["outputs"]
        if not (base / out).exists()
    ]


def _missing_remedy(manifest: dict, out: str) -> str:
    return f"rebuild: snakemake {manifest['results']}/{out} (in the run's working directory); or dvc pull its folder"


def _recorded_hashes(base: Path, manifest: dict) -> list[Finding]:
    """A damaged finding for every file whose sha256 differs from the one the manifest recorded when the run wrote
    it (edited by hand, or rebuilt alone since without the manifest)."""
    findings, listed = [], set(manifest["outputs"])
    for name, recorded in manifest["hashes"].items():
        path = base / name
        if not path.is_file():
            if name not in listed:  # a listed output is named by _missing_outputs
                why = "missing (the run recorded its hash when it wrote it)"
                findings.append(Finding(str(path), "damaged", why, _missing_remedy(manifest, name)))
            continue
        digest = file_sha256(path)
        if digest != recorded:
            why = f"sha256 {digest[:12]} differs from the {recorded[:12]} the run recorded when it wrote it (edited?)"
            remedy = (
                f"rebuild: snakemake --force {manifest['results']}/{name} {manifest['results']}/{MANIFEST.as_posix()}; "
                "or dvc pull its folder"
            )
            findings.append(Finding(str(path), "damaged", why, remedy))
    return findings


def _stores(base: Path) -> Iterator[Path]:
    for path in base.rglob(f"*{STORE_SUFFIX}"):
        if path.is_dir() and (path / "zarr.json").exists():
            yield path


def _inside_store(path: Path, base: Path) -> bool:
    return any(part.endswith(STORE_SUFFIX) for part in path.relative_to(base).parts[:-1])


def _check_store(store: Path) -> list[Finding]:
    combined = store.parent.name == "profiles"
    try:
        _read_every_chunk(storage.open_profiles(store, combined=combined))
    except (ValueError, FileNotFoundError) as err:
        return [Finding(str(store), "damaged", str(err).split("; rebuild it")[0], _store_remedy(store, combined))]
    arrays = _arrays(store)
    unprotected = [name for name in arrays if CHECKSUM_CODEC not in _codec_names(store / name)]
    whys = []
    if unprotected:
        which = "no array" if len(unprotected) == len(arrays) else f"arrays {unprotected}"
        whys.append(f"written before chunks carried checksums ({which} has one)")
    if not _attrs(store).get(storage.COMPLETE_ATTR):
        whys.append("written before every chunk was written (a missing chunk there reads as fill values)")
    return [Finding(str(store), "unprotected", "; ".join(whys) + "; a rebuild protects it")] if whys else []


def _attrs(store: Path) -> dict:
    return json.loads((store / "zarr.json").read_text(encoding="utf-8")).get("attributes", {})


def _read_every_chunk(ds: xr.Dataset) -> None:
    """Read each chunk of every data variable once, one chunk in memory at a time (a store can outgrow RAM);
    coordinates were read when the store was opened."""
    for variable in ds.data_vars.values():
        for block in variable.data.to_delayed().ravel():
            block.compute(scheduler="synchronous")


def _store_remedy(store: Path, combined: bool) -> str:
    rule = "combine_profiles" if combined else "extract_profiles"
    return f"rebuild: snakemake --force {store} (or every such store: --forcerun {rule}); or dvc pull its folder"


def _arrays(store: Path) -> list[str]:
    with storage.snakemake_timestamp_ignored():
        group = zarr.open_group(store, mode="r", zarr_format=3)
        return sorted(name for name, _ in group.arrays())


def _codec_names(array: Path) -> set[str]:
    """Names of every codec of an array, inner (sharded) codecs included."""
    meta = json.loads((array / "zarr.json").read_text(encoding="utf-8"))
    names = set()
    for codec in meta.get("codecs", []):
        names.add(codec["name"])
        names |= {inner["name"] for inner in codec.get("configuration", {}).get("codecs", [])}
    return names


def _check_table(table: Path) -> list[Finding]:
    try:
        if table.suffix == ".parquet":
            pd.read_parquet(table)
        elif table.suffix == ".safetensors":
            load_tensors(table)
        else:
            check_csv(table.read_text(encoding="utf-8"))
    except (ValueError, OSError, csv.Error, DamagedTensorsError) as err:
        remedy = f"rebuild: snakemake --force {table}; or dvc pull its folder"
        return [Finding(str(table), "damaged", f"{type(err).__name__}: {err}", remedy)]
    return []


def _check_dvc(base: Path) -> tuple[int, list[Finding]]:
    """(files hashed, mismatches) for every folder under ``base`` that a ``.dvc`` file tracks."""
    cache = _dvc_cache(base)
    hashed, findings = 0, []
    for tracker in sorted(base.glob("*.dvc")):
        for out in yaml.safe_load(tracker.read_text(encoding="utf-8")).get("outs", []):
            manifest = cache / out["md5"][:2] / out["md5"][2:] if cache and out.get("md5") else None
            if manifest is None or not manifest.is_file():
                continue
            folder = tracker.parent / out["path"]
            for entry in json.loads(manifest.read_text(encoding="utf-8")):
                if Path(entry["relpath"]).name in IGNORED:
                    continue
                hashed += 1
                findings += _check_hash(folder / entry["relpath"], entry["md5"], tracker)
    return hashed, findings


def _check_hash(path: Path, md5: str, tracker: Path) -> list[Finding]:
    remedy = f"dvc pull {tracker}"
    if not path.is_file():
        return [Finding(str(path), "damaged", "missing (DVC recorded it)", remedy)]
    digest = hashlib.md5()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != md5:
        return [Finding(str(path), "damaged", f"MD5 {digest.hexdigest()} differs from DVC's {md5}", remedy)]
    return []


def _dvc_cache(base: Path) -> Path | None:
    """The local DVC cache of the repository holding ``base`` (``.dvc/cache/files/md5``), or None."""
    for folder in (base.resolve(), *base.resolve().parents):
        if (folder / ".dvc").is_dir():
            return folder / ".dvc" / "cache" / "files" / "md5"
    return None
