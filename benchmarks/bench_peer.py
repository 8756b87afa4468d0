"""The project against ``entropy-profiler`` (PyPI), the peer a user would pick, in one process.

Both read the same model folder (materialized by the project) in float32 on the CPU, greedily, from the
same story prompts. The peer profiles one prompt at a time through ``generate(output_hidden_states=True)``
and decodes every block's last hidden state with the final norm and the head; the project runs batches
with a KV cache and its tiled lens (computing Renyi orders, top-p nuclei and their overlaps as well).
The project runs before and after the peer, so a drift in machine load biases neither side.

Reports tokens per second of each side (the project at each ``--batch-sizes``), then, on the token slots
where both generated the same tokens, the entropy difference per block: the largest and the median over
slots, and how many slots differ by more than 1e-3 nats.

    pip install --no-deps entropy-profiler==0.2.1   # plus seaborn; not a dependency of the project
    python benchmarks/bench_peer.py [--model smollm2-135m] [--prompts 16] [--new-tokens 16]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from bench_common import story_prompts

from entropy_lens import extract_profiles, load_model
from entropy_lens.lens.decoding import LensSettings
from entropy_lens.lens.encoding import PromptSettings
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.model.loading import default_cache_dir

TOP_P = 0.6
ALPHAS = (0.5, 1.0, 5.0)
AGREE_NATS = 1e-3


def model_folder(name: str) -> Path:
    """The folder both sides load: ``name`` itself, or where the project materialized registry model ``name``."""
    folder = Path(name)
    if folder.is_dir():
        return folder
    load_model(name, device="cpu")  # materializes a registry model on first use
    return default_cache_dir() / name


def peer_profiles(profiler, prompts: list[str], new_tokens: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The peer's ``[T, L]`` entropies and ``[T]`` generated ids of each prompt."""
    entropy, ids = [], []
    for prompt in prompts:
        profile = profiler.profile_text(prompt, max_new_tokens=new_tokens)
        entropy.append(profile.to_numpy())
        ids.append(profile.token_ids.numpy())
    return entropy, ids


def agreement(ours, peer_entropy: list[np.ndarray], peer_ids: list[np.ndarray]) -> tuple[np.ndarray, int]:
    """``[S, L]`` |ours - peer| on the ``S`` slots where both generated the same tokens so far, and ``S``."""
    rows = []
    for p, (entropy, ids) in enumerate(zip(peer_entropy, peer_ids, strict=True)):
        mine = ours.token_id.values[p]
        same = 0
        while same < min(len(ids), len(mine)) and mine[same] == ids[same]:
            same += 1
        rows.append(np.abs(ours.entropy.values[p, :same] - entropy[:same]))
    diffs = np.concatenate(rows)
    return diffs, len(diffs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="registry name or model folder")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--prompt-tokens", type=int, default=250)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    try:
        from entropy_profiler import EntropyProfiler
    except ImportError as err:
        raise SystemExit(
            f"entropy-profiler is not installed ({err}); pip install --no-deps entropy-profiler==0.2.1 seaborn"
        ) from None
    folder = model_folder(args.model)
    lm = load_model(folder, device="cpu", dtype="float32")
    profiler = EntropyProfiler(str(folder), device="cpu", dtype=torch.float32)
    prompts = story_prompts(lm.tokenizer, args.prompts, args.prompt_tokens, args.seed)
    print(f"model {folder.name}: {lm.n_layers} blocks, vocab {lm.vocab_size}, torch threads {torch.get_num_threads()}")
    print(f"{len(prompts)} prompts of about {args.prompt_tokens} tokens x {args.new_tokens} new tokens, float32")
    lens = LensSettings(top_p=TOP_P, alphas=ALPHAS)
    extract_profiles(lm, prompts[:1], generation=GenerationSettings(2), lens=lens)  # warm-up, both sides
    profiler.profile_text(prompts[0], max_new_tokens=2)

    def run_ours(batch_size: int):
        t0 = time.perf_counter()
        ds = extract_profiles(
            lm,
            prompts,
            generation=GenerationSettings(args.new_tokens),
            lens=lens,
            prompting=PromptSettings(batch_size=batch_size),
        )
        return ds, time.perf_counter() - t0

    before = {batch: run_ours(batch) for batch in args.batch_sizes}
    t0 = time.perf_counter()
    peer_entropy, peer_ids = peer_profiles(profiler, prompts, args.new_tokens)
    t_peer = time.perf_counter() - t0
    after = {batch: run_ours(batch)[1] for batch in args.batch_sizes}

    peer_rate = sum(len(i) for i in peer_ids) / t_peer
    print(f"{'':22s} {'seconds':>8s} {'tokens/s':>9s} {'vs peer':>8s}")
    print(f"{'entropy-profiler':22s} {t_peer:8.1f} {peer_rate:9.2f}")
    for batch in args.batch_sizes:
        ds, t_before = before[batch]
        seconds = (t_before + after[batch]) / 2
        rate = int((ds.token_id.values >= 0).sum()) / seconds
        print(
            f"{f'entropy-lens batch {batch}':22s} {seconds:8.1f} {rate:9.2f} {rate / peer_rate:7.1f}x"
            f"  ({t_before:.1f} s before the peer, {after[batch]:.1f} s after)"
        )
    ours = before[args.batch_sizes[0]][0]
    diffs, n_slots = agreement(ours, peer_entropy, peer_ids)
    print(f"entropy |entropy-lens - entropy-profiler| per block, nats, over {n_slots} token slots generated alike:")
    print(f"{'block':>5s} {'max':>10s} {'median':>10s} {f'> {AGREE_NATS:g}':>8s}")
    for block in range(diffs.shape[1]):
        col = diffs[:, block]
        print(f"{block:5d} {col.max():10.3g} {np.median(col):10.3g} {int((col > AGREE_NATS).sum()):8d}")


if __name__ == "__main__":
    main()
