"""Rule plot_layer_skip: the criticality map (what each block costs when skipped, beside its Delta H) and profiles."""

from entropy_lens.answers.letters import VERDICT_MEASURE
from entropy_lens.core.tables import read_csv_table
from entropy_lens.plots.skipping import plot_skip_map, plot_skip_profiles
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
model, out = snakemake.wildcards.model, snakemake.output

skip_map = read_csv_table(snakemake.input.skip_map, keep_default_na=False, na_values=[""]).query("model == @model")
schedule = snakemake.input.get("schedule")  # where a lens is fitted for the model: ΔH and KL under both lenses
plot_skip_map(
    skip_map[skip_map["measure"] == VERDICT_MEASURE],
    out.skip_map,
    title=f"{model}: what skipping each block costs on MMLU ({VERDICT_MEASURE})",
    schedule=read_csv_table(schedule) if schedule else None,
)
plot_skip_profiles(
    read_csv_table(snakemake.input.profiles), out.profiles, title=f"{model}: entropy at the answer under skipping"
)
