"""Rule plot_heatmap: token x layer entropy of the first prompt, top-1 token in each cell."""

from entropy_lens.model.loading import load_tokenizer
from entropy_lens.plots.profiles import plot_prompt_heatmap
from entropy_lens.store import storage
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
model, dataset = snakemake.wildcards.model, snakemake.wildcards.dataset

row = storage.open_profiles(snakemake.input.store).isel(prompt=0).load()
plot_prompt_heatmap(
    row,
    load_tokenizer(snakemake.input.model),
    snakemake.output.png,
    title=f"{model} on {dataset} prompt {row['prompt'].item()}",
)
