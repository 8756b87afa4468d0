"""Rule layer_skip_table: every model's layer-skip accuracies in one table."""

import logging

import pandas as pd

from entropy_lens.analysis import to_markdown

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
paths, csv_path, md_path = list(snakemake.input), snakemake.output.csv, snakemake.output.md

table = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)
table = table[table["group"] == "all"]
table.to_csv(csv_path, index=False)
with open(md_path, "w") as handle:
    handle.write(to_markdown(table) + "\n")
