"""Rule mmlu_accuracy: accuracy per model and style (log-likelihood and parsed letters)."""

import logging

import pandas as pd

from entropy_lens.analysis.paper import to_markdown
from entropy_lens.scoring import accuracy_table

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
score_paths, csv_path, md_path = list(snakemake.input), snakemake.output.csv, snakemake.output.md

table = accuracy_table(pd.concat([pd.read_parquet(p) for p in score_paths], ignore_index=True))
table.to_csv(csv_path, index=False)
with open(md_path, "w") as handle:
    handle.write(to_markdown(table) + "\n")
