"""Rule plot_mean_profiles: mean entropy profile per model vs normalized depth, coloured by family."""

from entropy_lens.analysis.families.profiles import layer_profiles
from entropy_lens.plots.profiles import plot_family_profiles
from entropy_lens.store import storage
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
dataset = snakemake.wildcards.dataset

profiles = layer_profiles(storage.open_profiles(snakemake.input[0], combined=True))
plot_family_profiles(profiles, snakemake.output.png, title=f"mean entropy profile: {dataset}")
