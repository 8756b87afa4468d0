"""Rule plot_layer_skip: accuracy vs k (expansion, pruning, random band) and profiles under skip."""

import pandas as pd

from entropy_lens.answers.letters import VERDICT_MEASURE
from entropy_lens.plots import plot_layer_skip, plot_skip_profiles
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
model, out = snakemake.wildcards.model, snakemake.output

accuracy = pd.read_csv(snakemake.input.accuracy).query("model == @model and measure == @VERDICT_MEASURE")
plot_layer_skip(accuracy, out.accuracy, title=f"{model}: MMLU ({VERDICT_MEASURE}) under layer skipping")
plot_skip_profiles(
    pd.read_csv(snakemake.input.profiles), out.profiles, title=f"{model}: entropy at the answer under skipping"
)
