"""The ``entropy-lens`` command line: quick looks at one model without the workflow."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from tqdm import tqdm

from entropy_lens.cli.compare import add_compare_parser, compare_command
from entropy_lens.cli.fetch import add_fetch_parser, fetch_command
from entropy_lens.cli.plan import plan_command
from entropy_lens.cli.profile import render_profile, sparkline
from entropy_lens.cli.skip_map import skip_map_command
from entropy_lens.store import storage
from entropy_lens.workflow import locks


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
    unlock = sub.add_parser(
        "unlock", help="remove the workflow's Snakemake lock left by a killed run, if no run holds it"
    )
    unlock.add_argument("--directory", default=".", help="the workflow's working directory")
    cost = sub.add_parser("plan", help="size every GPU job of a workflow config: FLOPs, memory, time, requests")
    cost.add_argument(
        "--configfile",
        default=["config.yaml"],
        nargs="+",
        help="workflow config (default config.yaml; config/paper.yaml); several overlay in order, as for Snakemake",
    )
    cost.add_argument("--results", default="results", help="results folder; its prompt tables refine the plan")
    cost.add_argument("--models", default="resources/models", help="materialized models (tokenizers count tokens)")
    cost.add_argument(
        "--benchmarks", default=None, help="Snakemake benchmark folder to compare with (default: RESULTS/benchmarks)"
    )
    skip = sub.add_parser("skip-map", help="what skipping each block costs, from a run's layer-skip tables")
    skip.add_argument("--results", default="results", help="results folder of a run (default: results)")
    skip.add_argument("--model", default=None, help="one model of the run (default: every model)")
    skip.add_argument("--measure", default="calibrated", help="answer measure: calibrated (default) or ll")
    check = sub.add_parser(
        "verify",
        help="read every store and table of a results folder, check that nothing its manifest lists is missing and "
        "DVC's hashes; exit 1 if any is damaged or missing, 2 if the folder is no results folder",
    )
    check.add_argument("results", nargs="?", default="results", help="results folder (default: results)")
    add_compare_parser(sub)
    add_fetch_parser(sub)
    _view_parser(sub)
    return parser


def _view_parser(sub) -> None:
    view = sub.add_parser(
        "view", help="one generation as an HTML page: token x block heatmap, the lens's top tokens on hover"
    )
    view.add_argument(
        "store", nargs="?", help="a profile store (.zarr; a combined one with --model); or give --model and --prompt"
    )
    view.add_argument("--prompt-id", default=None, help="the store's prompt to show (default: its first)")
    view.add_argument("--tokenizer", default=None, help="model folder or hub id decoding the store's tokens")
    view.add_argument(
        "--model",
        default=None,
        help="with a combined STORE, its model to show; with --prompt, generate afresh: registry name, hub id, "
        "folder or .gguf",
    )
    view.add_argument("--prompt", default=None, help="the prompt to generate from (with --model)")
    view.add_argument("--max-new-tokens", type=int, default=16)
    view.add_argument("--top-k", type=int, default=10, help="lens tokens shown on hover (with --model)")
    view.add_argument("--top-p", type=float, default=0.6)
    view.add_argument("--chat-template", action="store_true", help="render the prompt with the chat template")
    view.add_argument("--every", type=int, default=1, help="show every n-th block (the last one always)")
    view.add_argument("--device", default=None)
    view.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"])
    view.add_argument("--cache-dir", default=None, help="where registry models are materialized")
    view.add_argument("--out", default="view.html", help="the page to write (default: view.html)")


def _profile(args: argparse.Namespace) -> int:
    if args.out is not None and not args.out.endswith(".zarr"):
        raise ValueError(f"--out must name a .zarr store, got {args.out!r}")
    from entropy_lens.lens.decoding import LensSettings
    from entropy_lens.lens.encoding import PromptSettings
    from entropy_lens.lens.text import extract_profiles
    from entropy_lens.model.generation import GenerationSettings  # torch loads only for commands that need it
    from entropy_lens.model.loading import load_model

    lm = load_model(args.model, device=args.device, dtype=args.dtype, cache_dir=args.cache_dir)
    with tqdm(total=len(args.prompt), desc="prompts", unit="prompt", file=sys.stderr) as bar:
        ds = extract_profiles(
            lm,
            args.prompt,
            generation=GenerationSettings(args.max_new_tokens, args.sample, args.temperature, args.seed),
            lens=LensSettings(args.top_p, tuple(args.alphas)),
            prompting=PromptSettings(args.batch_size, args.chat_template),
            progress=bar.update,
        )
    print(render_profile(ds, lambda ids: lm.tokenizer.decode(ids)))
    if args.out:
        storage.write_profiles(ds, args.out)
        print(f"wrote {args.out}")
    return 0


def _models() -> int:
    from entropy_lens.model.registry import REGISTRY

    for spec in REGISTRY.values():
        print(f"{spec.name:22s} family={spec.family:6s} {spec.description}\n{'':22s} install: {spec.install}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from entropy_lens.store.verify import verify

    report = verify(args.results, progress=lambda store: print(f"reading {store}", file=sys.stderr))
    for finding in report.findings:
        print(finding.line())
    print(report.summary())
    return 0 if report.whole else 1


def _view(args: argparse.Namespace) -> int:
    from entropy_lens.plots import view

    fresh = args.store is None and args.model is not None and args.prompt is not None
    if not fresh and (args.store is None or args.prompt is not None):
        raise ValueError("view reads either a STORE (a combined one with --model), or --model with --prompt")
    if fresh:
        from entropy_lens.model.loading import load_model

        lm = load_model(args.model, device=args.device, dtype=args.dtype, cache_dir=args.cache_dir)
        gen = view.generation_from_model(
            lm, args.prompt, max_new_tokens=args.max_new_tokens, top_k=args.top_k, every=args.every,
            top_p=args.top_p, chat_template=args.chat_template,
        )  # fmt: skip
    else:
        gen = view.generation_from_path(
            args.store, args.prompt_id, args.tokenizer, every=args.every, cache_dir=args.cache_dir, model=args.model
        )
    print(f"wrote {view.write_view(gen, args.out)}: {len(gen.tokens)} tokens x {len(gen.blocks)} blocks")
    return 0


def _unlock(args: argparse.Namespace) -> int:
    removed = locks.release_stale_lock(args.directory)
    if removed:
        print(f"removed the stale Snakemake lock of {args.directory} ({len(removed)} files) left by a killed run")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for bad input, with the reason on stderr)."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        commands = {
            "profile": _profile,
            "plan": plan_command,
            "unlock": _unlock,
            "skip-map": skip_map_command,
            "verify": _verify,
            "compare": compare_command,
            "fetch": fetch_command,
        }
        commands["view"] = _view
        if args.command in commands:
            return commands[args.command](args)
        if args.command == "models":
            return _models()
        from entropy_lens.model.loading import materialize_model

        materialize_model(args.model, args.out)
        print(f"materialized {args.model} into {args.out}")
        return 0
    except (ValueError, FileNotFoundError, RuntimeError) as err:
        print(f"entropy-lens: error: {err}", file=sys.stderr)
        return 2


__all__ = ["main", "render_profile", "sparkline"]


if __name__ == "__main__":
    sys.exit(main())
