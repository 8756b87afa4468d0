"""Rule plot_mean_profiles: mean entropy profile per model vs normalized depth, coloured by family."""

import logging

from entropy_lens import storage
from entropy_lens.analysis.families import layer_profiles
from entropy_lens.plots import plot_family_profiles

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
store_path, dataset = snakemake.input[0], snakemake.wildcards.dataset
png, svg = snakemake.output.png, snakemake.output.svg

profiles = layer_profiles(storage.open_profiles(store_path, combined=True))
plot_family_profiles(profiles, png, title=f"mean entropy profile: {dataset}")
plot_family_profiles(profiles, svg, title=f"mean entropy profile: {dataset}")
