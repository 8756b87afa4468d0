"""Rule plot_layer_skip: accuracy vs k (expansion, pruning, random band) and profiles under skip."""

import logging

import pandas as pd

from entropy_lens.plots import plot_layer_skip, plot_skip_profiles

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
accuracy, profiles = pd.read_csv(snakemake.input.accuracy), pd.read_csv(snakemake.input.profiles)
model, out = snakemake.wildcards.model, snakemake.output

plot_layer_skip(accuracy[accuracy["group"] == "all"], out.accuracy, title=f"{model}: MMLU under layer skipping")
plot_skip_profiles(profiles, out.profiles, title=f"{model}: entropy profile under skipping")
