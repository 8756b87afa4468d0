"""Rule paper_table: the study's figures beside ours, one row per claim and model."""

import logging

import pandas as pd

from entropy_lens import storage
from entropy_lens.analysis import to_markdown
from entropy_lens.analysis.paper import mmlu_accuracy, paper_table

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
inputs = dict(snakemake.input.items())
mmlu_store = inputs.pop("mmlu_store", None)
md_path, csv_path = snakemake.output.md, snakemake.output.csv

tables = {name: pd.read_csv(path) for name, path in inputs.items()}
if mmlu_store is not None:
    tables["accuracy"] = mmlu_accuracy(storage.open_profiles(mmlu_store, combined=True))
table = paper_table(**tables)
table.to_csv(csv_path, index=False)
with open(md_path, "w") as handle:
    handle.write("# Entropy-Lens: the study's figures beside ours\n\n" + to_markdown(table) + "\n")
