"""Rule plot_profile_bands: mean entropy profile per label value with a 95% band, per model."""

from entropy_lens.analysis.bands import all_profile_bands
from entropy_lens.plots.profiles import plot_profile_bands
from entropy_lens.store import storage
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
label, dataset = snakemake.params.label, snakemake.wildcards.dataset

bands = all_profile_bands(storage.open_profiles(snakemake.input[0], combined=True), label)
plot_profile_bands(bands, snakemake.output.png, title=f"{dataset}: mean entropy profile by {label} (95% CI)")
