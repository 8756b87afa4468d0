"""Rule expansion_stats: Delta H vs nucleus-size change (Spearman) and adjacent-layer overlap."""

import logging

from entropy_lens import storage
from entropy_lens.analysis import to_markdown
from entropy_lens.analysis.expansion import expansion_points, expansion_spearman, nucleus_overlap
from entropy_lens.plots import plot_expansion

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
store_path, seed, dataset = snakemake.input[0], snakemake.params.seed, snakemake.wildcards.dataset
out = snakemake.output

ds = storage.open_profiles(store_path, combined=True)
spearman = expansion_spearman(ds)
overlap = nucleus_overlap(ds)
for table, csv_path, md_path in ((spearman, out.spearman, out.spearman_md), (overlap, out.overlap, out.overlap_md)):
    table.to_csv(csv_path, index=False)
    with open(md_path, "w") as handle:
        handle.write(to_markdown(table) + "\n")
plot_expansion(expansion_points(ds, seed=seed), out.png, spearman=spearman, title=f"expansion vs nucleus: {dataset}")
