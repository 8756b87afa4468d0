"""Reading and writing profile stores: chunked, compressed Zarr v3, written atomically.

The only module that touches Zarr.  A store is written into a temporary sibling
directory and renamed into place once complete, so a path either holds a whole,
schema-valid store or nothing: an interrupted job never leaves a store that looks
finished.  Arrays are chunked along ``prompt`` and grouped into shards (Zarr v3
sharding) so a store stays a modest number of files for DVC.

The chunk layout (:class:`Layout`) is how a store is written, not what it holds: the same
dataset reads back identical under any layout.  The workflow therefore hands it to the
writing job from the run's config at write time, never as a rule param, so that changing it
does not rerun the extraction that produced the values (docs/guide.md, "Store schema").
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
import zarr
from dask.array.core import getter

from entropy_lens.store import schema

logger = logging.getLogger(__name__)

ZSTD_LEVEL = 3
# Group attribute of a store whose every chunk was written, all-fill chunks too (Zarr skips those by default and
# reads any absent chunk as its fill value): in such a store an absent chunk file is damage, never "empty".
COMPLETE_ATTR = "every_chunk_written"
DEFAULT_CHUNK_PROMPTS = 16
DEFAULT_SHARD_PROMPTS = 512


@dataclass(frozen=True)
class Layout:
    """How a store's arrays are cut into files along ``prompt``.

    Attributes:
        chunk_prompts: Prompts per chunk (the unit read and checksummed).
        shard_prompts: Prompts per shard file (rounded down to whole chunks, at least one).
    """

    chunk_prompts: int = DEFAULT_CHUNK_PROMPTS
    shard_prompts: int = DEFAULT_SHARD_PROMPTS

    def __post_init__(self) -> None:
        if self.chunk_prompts <= 0 or self.shard_prompts <= 0:
            raise ValueError(
                f"chunk_prompts and shard_prompts must be positive, got {self.chunk_prompts}, {self.shard_prompts}"
            )

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> Layout:
        """The layout of the workflow config's ``storage`` section (``chunk_prompts``, ``shard_prompts``)."""
        return cls(section["chunk_prompts"], section["shard_prompts"])


def _codecs() -> tuple:
    """Bytes-to-bytes codecs of every array: zstd, then a CRC-32C of the compressed chunk, so that any
    flipped byte of a chunk fails its checksum when read (:func:`open_profiles` names the store)."""
    return (zarr.codecs.ZstdCodec(level=ZSTD_LEVEL), zarr.codecs.Crc32cCodec())


def _encoding(ds: xr.Dataset, layout: Layout) -> dict[str, dict]:
    """Per-variable Zarr encoding: zstd and a checksum for every array (coordinates too); data variables
    in chunks of ``layout.chunk_prompts`` along the prompt dim, ``layout.shard_prompts`` per shard file."""
    chunk_prompts, shard_prompts = layout.chunk_prompts, layout.shard_prompts
    encoding = {name: {"compressors": _codecs()} for name in ds.coords}
    shard = max(shard_prompts // chunk_prompts, 1) * chunk_prompts
    for name, var in ds.data_vars.items():
        chunks = tuple(min(chunk_prompts, n) if d == schema.PROMPT else n for d, n in var.sizes.items())
        shards = tuple(min(shard, n) if d == schema.PROMPT else n for d, n in var.sizes.items())
        shards = tuple(-(-s // c) * c for s, c in zip(shards, chunks, strict=True))
        encoding[name] = {"compressors": _codecs(), "chunks": chunks, "shards": shards}
    return encoding


def _object_strings(ds: xr.Dataset) -> xr.Dataset:
    """Variable-length strings (Zarr v3 ``string``) instead of fixed-width unicode."""
    fixed = {name: ds[name].astype(object) for name in ds.variables if ds[name].dtype.kind == "U"}
    return ds.assign_coords({k: v for k, v in fixed.items() if k in ds.coords}).assign(
        {k: v for k, v in fixed.items() if k not in ds.coords}
    )


def write_profiles(
    ds: xr.Dataset,
    path: str | os.PathLike,
    *,
    combined: bool = False,
    layout: Layout | None = None,
) -> Path:
    """Validate ``ds`` and write it to a Zarr v3 store at ``path``, whole or not at all.

    Args:
        ds: A per-model or combined profile dataset.
        path: Target directory (``*.zarr``); replaced if it exists.
        combined: Validate as a combined (model-dim) dataset.
        layout: Prompts per chunk and per shard file (one file per shard per variable); default :class:`Layout`.

    Raises:
        ValueError: when ``ds`` breaks the schema (nothing is written).
    """
    layout = Layout() if layout is None else layout
    schema.validate_profiles(ds, combined=combined)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    ds = _object_strings(ds.drop_encoding())
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}.") as tmp:
        staged = Path(tmp) / target.name
        ds.assign_attrs({COMPLETE_ATTR: True}).to_zarr(
            staged,
            mode="w",
            zarr_format=3,
            consolidated=False,
            encoding=_encoding(ds, layout),
            write_empty_chunks=True,
        )
        _replace_dir(staged, target)
    logger.info("wrote %s (%s)", target, dict(ds.sizes))
    return target


def _replace_dir(staged: Path, target: Path) -> None:
    if target.exists():
        trash = target.with_name(f".{target.name}.old-{uuid.uuid4().hex[:8]}")
        target.rename(trash)
        staged.rename(target)
        shutil.rmtree(trash)
    else:
        staged.rename(target)


def open_profiles(path: str | os.PathLike, *, combined: bool = False) -> xr.Dataset:
    """Open a store lazily (dask arrays) and check it against the schema.

    A damaged store (unreadable metadata, a missing chunk file, a chunk that fails its checksum
    or does not decompress) raises a ``ValueError`` naming the store and how to rebuild it, at
    open for metadata, coordinates and missing chunks, when the chunk is read for data variables.

    Raises:
        FileNotFoundError: when ``path`` holds no store.
        ValueError: when the store is damaged or breaks the schema.
    """
    target = Path(path)
    if not (target / "zarr.json").exists():
        raise FileNotFoundError(f"no profile store at {target} (missing zarr.json)")
    reader = functools.partial(_read_chunk, store=str(target), combined=combined)
    try:
        with snakemake_timestamp_ignored():
            ds = xr.open_zarr(target, consolidated=False, zarr_format=3, from_array_kwargs={"getitem": reader})
    except (ValueError, RuntimeError) as err:  # UnicodeDecodeError, JSONDecodeError; codecs raise RuntimeError
        raise ValueError(damaged_store_message(target, err, combined=combined)) from err
    if ds.attrs.pop(COMPLETE_ATTR, False):  # a property of the store, not of the profiles it holds
        _check_chunk_files(target, combined=combined)
    schema.validate_profiles(ds, combined=combined)
    return ds


def missing_chunks(store: str | os.PathLike) -> dict[str, list[str]]:
    """Array name -> the keys of its chunk (shard) files absent from ``store`` (arrays missing none left out).

    Only meaningful for a store written with every chunk (:data:`COMPLETE_ATTR`): elsewhere Zarr leaves out
    chunks that hold only the fill value.
    """
    with snakemake_timestamp_ignored():
        group = zarr.open_group(store, mode="r", zarr_format=3)
        arrays = dict(group.arrays())
    missing = {}
    for name, array in sorted(arrays.items()):
        absent = [key for key in _chunk_keys(array) if not (Path(store) / name / key).is_file()]
        if absent:
            missing[name] = absent
    return missing


def _chunk_keys(array: zarr.Array) -> list[str]:
    """The storage key of every chunk file of ``array``: one per shard where it is sharded."""
    per_file = array.shards or array.chunks
    grid = [-(-n // c) for n, c in zip(array.shape, per_file, strict=True)]
    return [array.metadata.encode_chunk_key(coords) for coords in np.ndindex(*grid)]


def _check_chunk_files(store: Path, *, combined: bool) -> None:
    """Raise the damaged-store error naming the first array with missing chunk files and those chunks."""
    for name, keys in missing_chunks(store).items():
        shown = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
        err = FileNotFoundError(f"chunk file(s) {shown} missing; Zarr would read them as fill values")
        raise ValueError(damaged_store_message(store, err, combined=combined, array=name))


def store_attrs(path: str | os.PathLike) -> dict:
    """The attributes of the store at ``path``, without reading or checking its arrays.

    Raises:
        ValueError: naming ``path`` when it holds no Zarr store.
    """
    try:
        with snakemake_timestamp_ignored():
            return dict(zarr.open_group(path, mode="r", zarr_format=3).attrs)
    except (FileNotFoundError, zarr.errors.GroupNotFoundError, ValueError) as err:
        raise ValueError(f"{path} is no profile store ({type(err).__name__}); give a .zarr store a run wrote") from err


@contextlib.contextmanager
def snakemake_timestamp_ignored() -> Iterator[None]:
    """Open a store quietly: Snakemake leaves a ``.snakemake_timestamp`` file inside directory outputs, which
    zarr warns is no part of the hierarchy."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*snakemake_timestamp.*")
        yield


def damaged_store_message(store: str | os.PathLike, err: Exception, *, combined: bool = False, array: str = "") -> str:
    """What to say about a store Zarr cannot read: which one (and which array, when known), why, and how to
    get it back: rebuild it, or pull it again where DVC versions it."""
    rule = "combine_profiles" if combined else "extract_profiles"
    sharded = "" if combined else " (one job per shard in a sharded run)"
    where = f"array {array!r}: " if array else ""
    return (
        f"profile store {store} is damaged ({where}{type(err).__name__}: {err}); rebuild it: "
        f"`snakemake --force {store}` reruns the job that wrote it, `snakemake --forcerun {rule}`{sharded} every "
        "such job; or, where DVC versions it, `dvc pull` fetches the recorded copy"
    )


def _read_chunk(array, key, asarray: bool = True, lock=None, *, store: str, combined: bool):
    """dask's chunk getter, with a damaged chunk reported as :func:`damaged_store_message`."""
    try:
        return getter(array, key, asarray=asarray, lock=lock)
    except (ValueError, RuntimeError) as err:  # zarr: "Stored and computed checksum do not match"; zstd: RuntimeError
        raise ValueError(damaged_store_message(store, err, combined=combined, array=_array_name(array))) from err


def _array_name(array: object) -> str:
    """The Zarr path of the array under xarray's lazy wrappers (``entropy``), or ``""`` when none is found."""
    for _ in range(8):
        if isinstance(array, zarr.Array):
            return str(array.path)
        array = getattr(array, "array", None) or getattr(array, "_array", None)
    return ""


def as_str(values: np.ndarray) -> np.ndarray:
    """String coordinate values as a plain ``str`` array whatever dtype Zarr returned."""
    return np.asarray([str(v) for v in np.asarray(values).ravel()], dtype=object).reshape(np.shape(values))


def open_all(paths: Mapping[str, str | os.PathLike], *, combined: bool = False, load: bool = False) -> dict:
    """:func:`open_profiles` of every store of ``paths`` (name -> path), loaded into memory if asked."""
    stores = {name: open_profiles(path, combined=combined) for name, path in paths.items()}
    return {name: ds.load() for name, ds in stores.items()} if load else stores
