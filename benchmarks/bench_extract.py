"""Extractor vs a faithful naive baseline of the study's method, in one process.

The baseline does what the official code does: no KV cache (the whole sequence is
recomputed at every step), one prompt at a time, every block's residual kept, then
the full ``[tokens, layers, vocab]`` logits materialized and soft-maxed in float32,
and the top-p set found by a full sort.  Both sides generate greedily from the same
token ids, so their profiles must agree; the script checks that before reporting.

The baseline handles one prompt at a time, so its tokens per second do not depend on
how many prompts it runs: it runs ``--naive-prompts`` of them, the extractor all
``--prompts`` at each of ``--batch-sizes``.  Prints tokens per second of each side, the
ratios, and the peak extra resident memory of each phase (sampled by a background
thread); then, unless ``--skip-lens``, the lens matmul against the machine's GEMM rate
for each embedded model (``bench_lens.py``).

    python benchmarks/bench_extract.py [--model smollm2-135m] [--prompts 16] [--batch-sizes 8 16]
"""

from __future__ import annotations

import argparse
import threading
import time
from contextlib import contextmanager

import numpy as np
import psutil
import torch
from bench_common import float64_nucleus_size, story_prompts
from bench_lens import add_arguments, report

from entropy_lens import extract_profiles, load_model
from entropy_lens.lens.decoding import LensSettings, lens_logits
from entropy_lens.lens.encoding import PromptSettings
from entropy_lens.model.generation import GenerationSettings, record_residuals

ALPHAS = (0.5, 1.0, 5.0)
TOP_P = 0.6


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
    out = {k: [] for k in ("entropy", "renyi", "nucleus_size", "top1_id", "token_id", "resid")}
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
        out["resid"].append(torch.stack(acts))  # kept for the float64 check of compare()
    return {k: torch.stack(v).numpy() for k, v in out.items()}


def compare(lm, ours, naive) -> dict[str, float]:
    """Largest differences between the two sides' profiles (``ours`` cut to the baseline's prompts).

    Where the top-p sizes differ, a float64 decode of that residual decides which side
    is right (``bench_common.float64_nucleus_size``): the baseline's float32 softmax and
    cumulative sum carry rounding the extractor's float64 sums do not.
    """
    differ = np.argwhere(ours.nucleus_size.values != naive["nucleus_size"])
    ours_wrong = sum(
        int(ours.nucleus_size.values[p, t, layer])
        != float64_nucleus_size(lm, torch.from_numpy(naive["resid"][p, t, layer]), TOP_P)
        for p, t, layer in differ
    )
    return {
        "token_ids_equal": float(np.array_equal(ours.token_id.values, naive["token_id"])),
        "top1_frac_equal": float((ours.top1_id.values == naive["top1_id"]).mean()),
        "nucleus_size_frac_equal": float((ours.nucleus_size.values == naive["nucleus_size"]).mean()),
        "nucleus_size_wrong_vs_float64": float(ours_wrong),
        "entropy_max_abs_diff": float(np.abs(ours.entropy.values - naive["entropy"]).max()),
        "renyi_max_abs_diff": float(np.abs(ours.renyi.values - naive["renyi"]).max()),
    }


def check(diffs: dict[str, float]) -> None:
    """Refuse to report timings of profiles that are not the same profiles."""
    if not (diffs["token_ids_equal"] == 1.0 and diffs["top1_frac_equal"] == 1.0):
        raise SystemExit("profiles differ (generated or top-1 tokens): the comparison is not like for like")
    if diffs["nucleus_size_wrong_vs_float64"] > 0:
        raise SystemExit("top-p sizes differ from the baseline and from a float64 decode")
    if max(diffs["entropy_max_abs_diff"], diffs["renyi_max_abs_diff"]) > 1e-3:
        raise SystemExit("entropies differ by more than float32 rounding")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--prompt-tokens", type=int, default=250)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--naive-prompts", type=int, default=2, help="prompts the baseline runs (one at a time)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-lens", action="store_true", help="skip the lens matmul vs GEMM rate report")
    add_arguments(parser)
    args = parser.parse_args()
    lm = load_model(args.model, device="cpu")
    prompts = story_prompts(lm.tokenizer, args.prompts, args.prompt_tokens, args.seed)
    n_tok = [len(lm.tokenizer(p)["input_ids"]) for p in prompts]
    print(f"model {args.model}: {lm.n_layers} layers, vocab {lm.vocab_size}, torch threads {torch.get_num_threads()}")
    print(f"{len(prompts)} prompts of {min(n_tok)}-{max(n_tok)} tokens x {args.new_tokens} new tokens")
    generation = GenerationSettings(max_new_tokens=args.new_tokens)
    lens = LensSettings(top_p=TOP_P, alphas=ALPHAS)
    extract_profiles(lm, prompts[:1], generation=GenerationSettings(2), lens=lens)  # warm-up

    def run_ours(batch_size: int):
        t0 = time.perf_counter()
        ds = extract_profiles(
            lm, prompts, generation=generation, lens=lens, prompting=PromptSettings(batch_size=batch_size)
        )
        return ds, time.perf_counter() - t0

    # ours runs before and after the baseline, so a drift in machine load biases neither side
    before, mem_ours = {}, {}
    for batch in args.batch_sizes:
        with peak_rss() as mem_ours[batch]:
            before[batch] = run_ours(batch)
    with peak_rss() as mem_naive:
        t0 = time.perf_counter()
        naive = naive_profiles(lm, prompts[: args.naive_prompts], args.new_tokens)
        t_naive = time.perf_counter() - t0
    after = {batch: run_ours(batch)[1] for batch in args.batch_sizes}

    naive_rate = naive["token_id"].size / t_naive
    print(f"{'':12s} {'seconds':>9s} {'tokens/s':>9s} {'peak extra RSS MiB':>19s} {'vs naive':>9s}")
    print(f"{'naive':12s} {t_naive:9.1f} {naive_rate:9.2f} {mem_naive['mb']:19.0f}")
    for batch in args.batch_sizes:
        ours, t_before = before[batch]
        t_ours = (t_before + after[batch]) / 2
        rate = int((ours.token_id.values >= 0).sum()) / t_ours
        line = f"{t_ours:9.1f} {rate:9.2f} {mem_ours[batch]['mb']:19.0f} {rate / naive_rate:8.2f}x"
        print(f"{f'ours batch {batch}':12s} {line}  ({t_before:.1f} s before the baseline, {after[batch]:.1f} s after)")
        diffs = compare(lm, ours.isel(prompt=slice(0, args.naive_prompts)), naive)
        for key, value in diffs.items():
            print(f"  {key}: {value:.6g}")
        check(diffs)
    if not args.skip_lens:
        report(args)


if __name__ == "__main__":
    main()
