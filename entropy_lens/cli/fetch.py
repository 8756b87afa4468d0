"""``entropy-lens fetch``: every hub model and dataset a workflow config reads, downloaded into the Hugging Face
cache on a node that reaches the hub, then checked, so that jobs elsewhere run with ``HF_HUB_OFFLINE=1``."""

from __future__ import annotations

import argparse
import sys


def add_fetch_parser(sub: argparse._SubParsersAction) -> None:
    """The ``fetch`` subcommand's arguments."""
    fetch = sub.add_parser(
        "fetch",
        help="download every hub model and dataset a workflow config reads into the Hugging Face cache (HF_HOME), "
        "then check the cache; with HF_HUB_OFFLINE=1 only check; exit 1 if anything is missing",
    )
    fetch.add_argument(
        "--configfile",
        default=["config.yaml"],
        nargs="+",
        help="workflow config, as given to Snakemake (config/paper.yaml; several overlay in order)",
    )
    fetch.add_argument("--results", default="results", help="results folder (prompt tables made from a hub dataset)")


def fetch_command(args: argparse.Namespace) -> int:
    """Download what is missing (online), then print one line per source and the verdict on the cache."""
    from entropy_lens.model.hub import gated_licence, hub_cache_dir, hub_offline
    from entropy_lens.prompts.hub import datasets_cache_dir
    from entropy_lens.workflow.fetch import MODEL, download, gated_line, hub_sources
    from entropy_lens.workflow.settings import load_config  # the config and hub libraries load only for fetch

    config = load_config(*args.configfile)
    sources = hub_sources(config, args.results)
    configs = " ".join(args.configfile)
    if not sources:
        print(f"{configs} reads nothing from the Hugging Face hub (no hub model or hub dataset): nothing to fetch")
        return 0
    models = sum(source.kind == MODEL for source in sources)
    print(
        f"{configs}: {models} hub models and {len(sources) - models} hub datasets; HF_HUB_CACHE {hub_cache_dir()}, "
        f"HF_DATASETS_CACHE {datasets_cache_dir()}"
    )
    for source in sources:
        if source.kind == MODEL and gated_licence(source.repo_id):
            print(gated_line(source))
    if hub_offline():
        print("HF_HUB_OFFLINE=1: nothing is downloaded; checking the cache")
    else:
        for source in (s for s in sources if s.missing()):
            try:
                download(source, print)
            except ValueError as err:
                print(f"entropy-lens: error: {err}", file=sys.stderr)
    return _check(sources)


def _size(n_bytes: int) -> str:
    return f"{n_bytes / 1e9:.2f} GB" if n_bytes >= 1e8 else f"{n_bytes / 1e6:.1f} MB"


def _check(sources) -> int:
    """One line per source (ok and its size in the cache, or what the cache lacks); 1 when any is missing."""
    missing = {source: source.missing() for source in sources}
    total = sum(source.cached_bytes() for source in sources)
    for source, lacks in missing.items():
        state = f"MISSING {', '.join(lacks)}" if lacks else f"ok, {_size(source.cached_bytes())}"
        print(f"{source.label}: {state}")
    absent = [source.repo_id for source, lacks in missing.items() if lacks]
    if absent:
        print(
            f"{len(absent)} of {len(sources)} sources missing from the cache ({', '.join(absent)}): jobs that read "
            "them fail with HF_HUB_OFFLINE=1; run entropy-lens fetch where the hub is reachable"
        )
        return 1
    print(
        f"all {len(sources)} sources are in the cache ({_size(total)}): run the jobs with HF_HUB_OFFLINE=1 and this "
        "HF_HOME (or HF_HUB_CACHE and HF_DATASETS_CACHE) on every node"
    )
    return 0
