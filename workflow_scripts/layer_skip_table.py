"""Rule layer_skip_table: accuracy per condition, the criticality map, the study's comparisons and the rank test."""

import pandas as pd

from entropy_lens.core.tables import read_csv_table, write_table
from entropy_lens.skipping.comparisons import skip_comparisons
from entropy_lens.skipping.criticality import condition_table, criticality_spearman, skip_map
from entropy_lens.skipping.plan import read_plan
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
inputs, out, boot = (
    snakemake.input,
    snakemake.output,
    {"n_boot": snakemake.params.n_boot, "seed": snakemake.params.seed},
)

accuracy, maps, comparisons, spearman = [], [], [], []
for correct_path, plan_path, delta_h_path in zip(inputs.correct, inputs.plans, inputs.delta_h, strict=True):
    correct, plan = pd.read_parquet(correct_path), read_plan(plan_path)
    accuracy.append(condition_table(correct).assign(model=plan.model))
    maps.append(skip_map(correct, plan, **boot))
    comparisons.append(skip_comparisons(correct, plan, **boot))
    spearman.append(criticality_spearman(correct, read_csv_table(delta_h_path), plan, **boot))
stability = pd.concat([read_csv_table(path) for path in inputs.stability], ignore_index=True)

write_table(pd.concat(accuracy), out.csv, out.md, title="MMLU accuracy under layer skipping (95% Wilson intervals)")
write_table(
    pd.concat(maps),
    out.skip_map,
    out.skip_map_md,
    title="criticality map: every block skipped alone (95%; block 0 has no ΔH and is never eligible)",
)
write_table(
    pd.concat(comparisons),
    out.comparisons,
    out.comparisons_md,
    title=(
        "expansion vs random vs pruning skips, paired over questions (first minus second, 95% bootstrap; "
        "p_holm and holm_low/high: Holm within each model's claim, which decides)"
    ),
)
write_table(
    pd.concat(spearman), out.spearman, out.spearman_md, title="Spearman of Delta H with the cost of skipping a block"
)
write_table(
    stability, out.stability, out.stability_md, title="how often each block is the top block (calibration bootstrap)"
)
