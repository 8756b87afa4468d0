"""The ``entropy-lens`` command line: quick looks at one model without the workflow."""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Sequence

import numpy as np
import xarray as xr
from tqdm import tqdm

from entropy_lens import REGISTRY, extract_profiles, load_model, materialize_model, storage

SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float], lo: float, hi: float) -> str:
    """One block character per value, scaled between ``lo`` and ``hi`` (NaN as space)."""
    span = max(hi - lo, 1e-12)
    chars = []
    for v in values:
        if not math.isfinite(v):
            chars.append(" ")
            continue
        chars.append(SPARK[min(int((v - lo) / span * len(SPARK)), len(SPARK) - 1)])
    return "".join(chars)


def render_profile(ds: xr.Dataset, decode) -> str:
    """Generated text, then per layer: depth, mean entropy, nucleus size, top-1 token."""
    lines = []
    for i, pid in enumerate(ds.prompt.values):
        row = ds.isel(prompt=i)
        ids = [int(t) for t in row.token_id.values if t >= 0]
        entropy = row.entropy.mean("token", skipna=True).values
        vmax = math.log(int(ds.attrs["vocab_size"]))
        lines += [f"[{pid}] {row.prompt_text.item()!s}", f"  -> {decode(ids)!r}", ""]
        lines.append(f"  mean entropy over depth (0 .. log V = {vmax:.2f} nats): {sparkline(entropy, 0.0, vmax)}")
        lines.append("  layer  depth  H [nats]  nucleus  top-1 (first token)")
        for layer in range(ds.sizes["layer"]):
            cell = row.isel(layer=layer)
            top1 = decode([int(cell.top1_id.values[0])]) if cell.top1_id.values[0] >= 0 else ""
            lines.append(
                f"  {layer:5d}  {float(cell.depth):5.2f}  {entropy[layer]:8.3f}  "
                f"{np.nanmedian(np.where(cell.nucleus_size.values >= 0, cell.nucleus_size.values, np.nan)):7.0f}  "
                f"{top1!r}"
            )
        lines.append("")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="entropy-lens", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress of loading and writing")
    sub = parser.add_subparsers(dest="command", required=True)
    prof = sub.add_parser("profile", help="generate from prompts and show per-layer entropy profiles")
    prof.add_argument("--model", required=True, help="registry name, hub id org/name, model folder or .gguf")
    prof.add_argument("--prompt", action="append", required=True, help="prompt text (repeat for several)")
    prof.add_argument("--max-new-tokens", type=int, default=16)
    prof.add_argument("--top-p", type=float, default=0.6)
    prof.add_argument("--alphas", type=float, nargs="+", default=[0.5, 1.0, 5.0])
    prof.add_argument("--batch-size", type=int, default=8)
    prof.add_argument("--sample", action="store_true", help="sample instead of greedy decoding")
    prof.add_argument("--temperature", type=float, default=1.0)
    prof.add_argument("--seed", type=int, default=0)
    prof.add_argument("--chat-template", action="store_true", help="render prompts with the chat template")
    prof.add_argument("--device", default=None)
    prof.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"])
    prof.add_argument("--cache-dir", default=None, help="where registry models are materialized")
    prof.add_argument("--out", default=None, help="write the profiles to this .zarr store")
    sub.add_parser("models", help="list the registry of embedded models")
    mat = sub.add_parser("materialize", help="save a fast-loading copy of a model into a folder")
    mat.add_argument("model")
    mat.add_argument("out")
    return parser


def _profile(args: argparse.Namespace) -> int:
    if args.out is not None and not args.out.endswith(".zarr"):
        raise ValueError(f"--out must name a .zarr store, got {args.out!r}")
    lm = load_model(args.model, device=args.device, dtype=args.dtype, cache_dir=args.cache_dir)
    with tqdm(total=len(args.prompt), desc="prompts", unit="prompt", file=sys.stderr) as bar:
        ds = extract_profiles(
            lm,
            args.prompt,
            max_new_tokens=args.max_new_tokens,
            top_p=args.top_p,
            alphas=args.alphas,
            batch_size=args.batch_size,
            do_sample=args.sample,
            temperature=args.temperature,
            seed=args.seed,
            chat_template=args.chat_template,
            progress=bar.update,
        )
    print(render_profile(ds, lambda ids: lm.tokenizer.decode(ids)))
    if args.out:
        storage.write_profiles(ds, args.out)
        print(f"wrote {args.out}")
    return 0


def _models() -> int:
    for spec in REGISTRY.values():
        print(f"{spec.name:22s} family={spec.family:6s} {spec.description}\n{'':22s} install: {spec.install}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for bad input, with the reason on stderr)."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        if args.command == "profile":
            return _profile(args)
        if args.command == "models":
            return _models()
        materialize_model(args.model, args.out)
        print(f"materialized {args.model} into {args.out}")
        return 0
    except (ValueError, FileNotFoundError) as err:
        print(f"entropy-lens: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
