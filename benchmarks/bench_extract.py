"""Extractor vs a faithful naive baseline of the study's method, in one process.

The baseline does what the official code does: no KV cache (the whole sequence is
recomputed at every step), one prompt at a time, every block's residual kept, then
the full ``[tokens, layers, vocab]`` logits materialized and soft-maxed in float32,
and the top-p set found by a full sort.  Both sides generate greedily from the same
token ids, so their profiles must agree; the script checks that before reporting.

Prints tokens per second of each side, the ratio, and the peak extra resident memory
of each phase (sampled by a background thread).

    python benchmarks/bench_extract.py [--model smollm2-135m] [--prompts 16] [--new-tokens 16]
"""

from __future__ import annotations

import argparse
import math
import random
import threading
import time
from contextlib import contextmanager

import numpy as np
import psutil
import torch

from entropy_lens import extract_profiles, load_model
from entropy_lens.generation import record_residuals
from entropy_lens.lens import lens_logits

ALPHAS = (0.5, 1.0, 5.0)
TOP_P = 0.6
SENTENCES = (
    "Once upon a time, there was a little girl named {name} who loved to play in the {place}.",
    "Every morning {name} looked at the {thing} and smiled, because it reminded her of her mom.",
    "One day, a big {animal} came to the {place} and wanted to play with the {thing}.",
    "{name} was scared at first, but then she saw that the {animal} was friendly and kind.",
    "They played together all day long, laughing and running around the {place}.",
    "When the sun went down, the {animal} said goodbye and promised to come back tomorrow.",
    "{name} went home and told her dad all about her new friend and the shiny {thing}.",
    "Her dad hugged her and said that sharing is the best way to make a friend happy.",
    "The next day it rained, so {name} stayed inside and drew a picture of the {animal}.",
    "She gave the picture to her friend, and the {animal} was so happy that it danced.",
)
NAMES = ("Lily", "Tom", "Mia", "Ben", "Sue", "Max", "Anna", "Sam")
PLACES = ("park", "garden", "forest", "yard", "beach", "meadow")
THINGS = ("ball", "kite", "flower", "red box", "toy car", "blue hat")
ANIMALS = ("dog", "cat", "bear", "bird", "frog", "rabbit")


def story_prompts(tokenizer, n: int, n_tokens: int, seed: int) -> list[str]:
    """``n`` children's-story prompts of about ``n_tokens`` tokens each."""
    rng = random.Random(seed)
    prompts = []
    for _ in range(n):
        fill = dict(
            name=rng.choice(NAMES), place=rng.choice(PLACES), thing=rng.choice(THINGS), animal=rng.choice(ANIMALS)
        )
        text = ""
        while len(tokenizer(text)["input_ids"]) < n_tokens:
            text += rng.choice(SENTENCES).format(**fill) + " "
        prompts.append(text.strip())
    return prompts


@contextmanager
def peak_rss():
    """Yield a dict whose ``mb`` is set to the peak RSS above the starting RSS."""
    proc = psutil.Process()
    start = proc.memory_info().rss
    result = {"mb": 0.0}
    stop = threading.Event()

    def sample():
        peak = start
        while not stop.is_set():
            peak = max(peak, proc.memory_info().rss)
            time.sleep(0.005)
        result["mb"] = (peak - start) / 2**20

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield result
    finally:
        stop.set()
        thread.join()


@torch.inference_mode()
def naive_profiles(lm, prompts: list[str], new_tokens: int) -> dict[str, np.ndarray]:
    """The baseline: per prompt, recompute everything each step, then decode all at once."""
    out = {k: [] for k in ("entropy", "renyi", "nucleus_size", "top1_id", "token_id")}
    for prompt in prompts:
        ids = lm.tokenizer(prompt)["input_ids"]
        acts = []
        for _ in range(new_tokens):
            with record_residuals(lm) as slots:
                logits = lm.model(input_ids=torch.tensor([ids]), output_hidden_states=True).logits
            acts.append(torch.stack(slots, dim=1)[0])  # [L, d]
            ids = [*ids, int(logits[0, -1].argmax())]
        full = lens_logits(lm, torch.stack(acts))  # [T, L, V] float32, materialized
        probs = torch.softmax(full, dim=-1)
        logp = torch.log_softmax(full, dim=-1)
        sorted_p = probs.sort(dim=-1, descending=True).values
        out["entropy"].append(-(probs * logp).sum(-1))
        out["renyi"].append(
            torch.stack(
                [-(probs * logp).sum(-1) if a == 1 else torch.log((probs**a).sum(-1)) / (1 - a) for a in ALPHAS], dim=-1
            )
        )
        out["nucleus_size"].append((sorted_p.cumsum(-1) < TOP_P - 1e-6).sum(-1) + 1)
        out["top1_id"].append(probs.argmax(-1))
        out["token_id"].append(torch.tensor(ids[-new_tokens:]))
    return {k: torch.stack(v).numpy() for k, v in out.items()}


def compare(ours, naive) -> dict[str, float]:
    """Largest differences between the two sides' profiles."""
    return {
        "token_ids_equal": float(np.array_equal(ours.token_id.values, naive["token_id"])),
        "entropy_max_abs_diff": float(np.abs(ours.entropy.values - naive["entropy"]).max()),
        "renyi_max_abs_diff": float(np.abs(ours.renyi.values - naive["renyi"]).max()),
        "nucleus_size_frac_equal": float((ours.nucleus_size.values == naive["nucleus_size"]).mean()),
        "top1_frac_equal": float((ours.top1_id.values == naive["top1_id"]).mean()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--prompt-tokens", type=int, default=250)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    lm = load_model(args.model, device="cpu")
    prompts = story_prompts(lm.tokenizer, args.prompts, args.prompt_tokens, args.seed)
    n_tok = [len(lm.tokenizer(p)["input_ids"]) for p in prompts]
    print(f"model {args.model}: {lm.n_layers} layers, vocab {lm.vocab_size}, torch threads {torch.get_num_threads()}")
    print(f"{len(prompts)} prompts of {min(n_tok)}-{max(n_tok)} tokens x {args.new_tokens} new tokens")

    extract_profiles(lm, prompts[:1], max_new_tokens=2)  # warm-up

    def run_ours():
        t0 = time.perf_counter()
        ds = extract_profiles(
            lm, prompts, max_new_tokens=args.new_tokens, top_p=TOP_P, alphas=ALPHAS, batch_size=args.batch_size
        )
        return ds, time.perf_counter() - t0

    # ours runs before and after the baseline, so a drift in machine load biases neither side
    with peak_rss() as mem_ours:
        ours, t_before = run_ours()
    with peak_rss() as mem_naive:
        t0 = time.perf_counter()
        naive = naive_profiles(lm, prompts, args.new_tokens)
        t_naive = time.perf_counter() - t0
    _, t_after = run_ours()
    t_ours = (t_before + t_after) / 2
    print(f"ours: {t_before:.1f} s before the baseline, {t_after:.1f} s after")

    generated = int((ours.token_id.values >= 0).sum())
    print(f"{'':10s} {'seconds':>9s} {'tokens/s':>9s} {'peak extra RSS MiB':>19s}")
    print(f"{'ours':10s} {t_ours:9.1f} {generated / t_ours:9.2f} {mem_ours['mb']:19.0f}")
    print(f"{'naive':10s} {t_naive:9.1f} {generated / t_naive:9.2f} {mem_naive['mb']:19.0f}")
    print(f"throughput ratio ours/naive: {t_naive / t_ours:.2f}x")
    for key, value in compare(ours, naive).items():
        print(f"  {key}: {value:.6g}")
    if not math.isclose(compare(ours, naive)["token_ids_equal"], 1.0):
        raise SystemExit("profiles differ: the comparison is not like for like")


if __name__ == "__main__":
    main()
