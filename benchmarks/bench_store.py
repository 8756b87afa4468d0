"""What the stores' chunk checksums cost: write time, read time and size, with and without CRC-32C.

Every array of a store is zstd-compressed and then checksummed (CRC-32C of each compressed chunk), so a
flipped byte is refused when read. This writes and reads the same dataset both ways in one process,
rounds alternating and the fastest of each kept, and reports the ratios (checksummed / zstd alone).

    python benchmarks/bench_store.py [--store results/profiles/smollm2-135m/formats.zarr] [--rounds 5]

Without ``--store`` it uses the largest per-model store under ``results/profiles`` (after ``make run``), or,
where there is none, profiles 64 story prompts with the embedded SmolLM2 first.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from unittest import mock

import xarray as xr
import zarr

from entropy_lens.model.generation import GenerationSettings
from entropy_lens.store import storage


@contextmanager
def zstd_only():
    """The codecs before the checksum: zstd alone."""
    with mock.patch.object(storage, "_codecs", lambda: (zarr.codecs.ZstdCodec(level=storage.ZSTD_LEVEL),)):
        yield


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _round(ds: xr.Dataset, folder: Path, name: str) -> tuple[float, float, int]:
    """(write s, read s, bytes) of one write and one full read of ``ds``."""
    began = time.perf_counter()
    path = storage.write_profiles(ds, folder / f"{name}.zarr")
    wrote = time.perf_counter()
    storage.open_profiles(path).load()
    return wrote - began, time.perf_counter() - wrote, _size(path)


def largest_store(root: Path) -> Path | None:
    stores = sorted(root.glob("*/*.zarr"), key=_size)
    return stores[-1] if stores else None


def embedded_profiles() -> xr.Dataset:
    """64 story prompts of about 48 tokens, 16 generated tokens each, from the embedded SmolLM2."""
    from bench_common import story_prompts

    from entropy_lens import extract_profiles, load_model

    lm = load_model("smollm2-135m", device="cpu")
    return extract_profiles(lm, story_prompts(lm.tokenizer, 64, 48, seed=0), generation=GenerationSettings(16))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=None, help="a per-model store to rewrite")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    source = args.store or largest_store(Path("results/profiles"))
    ds = storage.open_profiles(source).load() if source else embedded_profiles()
    source = source or "smollm2-135m on 64 story prompts"
    best: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            for name in ("checksum", "zstd") if i % 2 == 0 else ("zstd", "checksum"):
                with zstd_only() if name == "zstd" else nullcontext():
                    result = _round(ds, Path(tmp), name)
                best[name] = [min(a, b) for a, b in zip(best.get(name, result), result, strict=True)]
    print(f"store {source} ({dict(ds.sizes)}), fastest of {args.rounds} rounds each")
    print(f"{'':10} {'write s':>9} {'read s':>9} {'bytes':>12}")
    for name, (write, read, size) in best.items():
        print(f"{name:10} {write:9.3f} {read:9.3f} {size:12,d}")
    ratio = [c / z for c, z in zip(best["checksum"], best["zstd"], strict=True)]
    print(f"{'ratio':10} {ratio[0]:9.3f} {ratio[1]:9.3f} {ratio[2]:12.4f}   (checksummed / zstd alone)")


if __name__ == "__main__":
    main()
