"""Rule layer_skip_select: mean Delta H on calibration prompts -> skip conditions and guidance."""

import json

from entropy_lens.answers.skipping import select_conditions
from entropy_lens.lens.logit_lens import LensSettings
from entropy_lens.prompts.datasets import read_table
from entropy_lens.workflow.jobs import job_model, setup_logging

setup_logging(snakemake)
skip, lens, out = snakemake.params.skip, snakemake.params.lens, snakemake.output

table = read_table(snakemake.input.calibration, "mmlu")
with job_model(snakemake) as lm:
    conditions, protected = select_conditions(
        lm,
        table,
        lens=LensSettings.from_config(lens),
        chat_template=snakemake.params.chat_template,
        tokens=skip["calibration_tokens"],
        ks=skip["ks"],
        n_random=skip["random_sets"],
        seed=skip["seed"],
    )
with open(out.conditions, "w") as handle:
    json.dump(conditions, handle, indent=2)
with open(out.protected, "w") as handle:
    json.dump(protected, handle, indent=2)
