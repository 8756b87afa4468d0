"""Rule plot_profile_bands: mean entropy profile per label value with a 95% band, per model."""

import logging

import pandas as pd

from entropy_lens import storage
from entropy_lens.analysis.features import profile_bands
from entropy_lens.plots import plot_profile_bands

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
store_path, label = snakemake.input[0], snakemake.params.label
dataset, png = snakemake.wildcards.dataset, snakemake.output[0]

ds = storage.open_profiles(store_path, combined=True)
bands = pd.concat([profile_bands(ds, str(m), label) for m in ds["model"].values], ignore_index=True)
plot_profile_bands(bands, png, title=f"{dataset}: mean entropy profile by {label} (95% CI)")
