"""Rule plot_skip_criteria: each pruning criterion's ranking beside the measured cost, and the exit curve."""

from entropy_lens.answers.letters import VERDICT_MEASURE
from entropy_lens.core.tables import read_csv_table
from entropy_lens.plots.pruning import plot_criteria, plot_exit_curve
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
model, inputs, out = snakemake.wildcards.model, snakemake.input, snakemake.output

skip_map = read_csv_table(inputs.skip_map, keep_default_na=False, na_values=[""]).query("model == @model")
plot_criteria(
    skip_map[skip_map["measure"] == VERDICT_MEASURE],
    read_csv_table(inputs.criteria).query("model == @model"),
    out.criteria,
    title=f"{model}: cost of skipping each block and each criterion's ranking",
)
plot_exit_curve(
    read_csv_table(inputs.exit_curve).query("model == @model"),
    out.exit_curve,
    title=f"{model}: the MMLU answer read at every block",
)
