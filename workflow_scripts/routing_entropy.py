"""Rule routing_entropy: Delta H against routing entropy over MoE layers, with prompt-bootstrap intervals."""

from entropy_lens.analysis.routing import routing_tables
from entropy_lens.core.tables import write_table
from entropy_lens.store import storage
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
out = snakemake.output

stores = storage.open_all(dict(snakemake.input.items()), combined=True)
summary, layers = routing_tables(stores, n_boot=snakemake.params.n_boot, seed=snakemake.params.seed)
write_table(summary, out.summary, out.summary_md, title="Delta H vs routing entropy (Spearman over MoE layers)")
write_table(layers, out.layers, out.layers_md, title="mean Delta H and routing entropy per MoE layer")
