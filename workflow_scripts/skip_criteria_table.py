"""Rule skip_criteria_table: each pruning criterion per block, its Spearman with the cost, drop sets and their
scores against random sets, the exit curve."""

import pandas as pd

from entropy_lens.core.tables import write_table
from entropy_lens.prompts.datasets import read_table
from entropy_lens.skipping.criteria import criteria_spearman, criteria_table
from entropy_lens.skipping.drop_scores import drop_scores
from entropy_lens.skipping.exit import exit_curve, threshold_exit
from entropy_lens.skipping.pruning import drop_sets
from entropy_lens.skipping.readings import frames_readings
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
inputs, out, params = snakemake.input, snakemake.output, snakemake.params
boot = {"n_boot": params.n_boot, "seed": params.seed}

questions = read_table(inputs.evaluation, "mmlu").assign(question_id=lambda t: t["question_id"].astype(str))
questions = questions.set_index("question_id")
tables = {"criteria": [], "spearman": [], "exit": [], "threshold": [], "drop": [], "scores": []}
paths = zip(inputs.correct, inputs.readings, inputs.angles, inputs.drops, strict=True)
for correct_path, readings_path, angles_path, drops_path in paths:
    correct = pd.read_parquet(correct_path)
    model = str(correct["model"].iloc[0])
    readings = frames_readings(pd.read_parquet(readings_path), pd.read_parquet(angles_path))
    asked = questions.loc[list(readings.questions)]
    answers, styles = asked["answer"].tolist(), asked["style"].tolist()
    tables["criteria"].append(criteria_table(readings, model))
    tables["drop"].append(drop_sets(tables["criteria"][-1], readings, model, params.variants, params.drop_shares))
    tables["scores"].append(drop_scores(pd.read_parquet(drops_path), tables["drop"][-1], readings.n_layers, **boot))
    tables["spearman"].append(criteria_spearman(correct, readings, model, params.variants, **boot))
    tables["exit"].append(exit_curve(readings, answers, styles, model))
    tables["threshold"].append(threshold_exit(readings, answers, styles, model))

write_table(
    pd.concat(tables["criteria"]),
    out.criteria,
    out.criteria_md,
    title="pruning criteria per block (higher: predicted more critical), read at the sweep's intact pass",
)
write_table(
    pd.concat(tables["spearman"]),
    out.spearman,
    out.spearman_md,
    title="Spearman of each criterion with the cost of skipping a block alone (95%, questions and blocks resampled)",
)
write_table(
    pd.concat(tables["exit"]),
    out.exit_curve,
    out.exit_curve_md,
    title="MMLU read at every block through the logit lens and, where fitted, the linear lens",
)
write_table(
    pd.concat(tables["threshold"]),
    out.exit_threshold,
    out.exit_threshold_md,
    title="entropy-threshold exit: stop at the first block whose entropy under each lens falls below tau",
)
write_table(
    pd.concat(tables["drop"]),
    out.drop_sets,
    out.drop_sets_md,
    title="drop sets: the k least critical eligible blocks by each criterion, and Gromov's contiguous span",
)
write_table(
    pd.concat(tables["scores"]),
    out.drop_scores,
    out.drop_scores_md,
    title="drop sets scored: each criterion's k blocks skipped together against random k-sets (95%, paired over "
    "questions; beyond: one random set per replicate)",
)
