"""Rule layer_skip_select: Delta H at the answer position on calibration questions (through the logit lens and,
where one is fitted, the linear lens) -> the skips to score."""

import dataclasses
import json

from entropy_lens.core.tables import write_csv
from entropy_lens.lens.translators import Translators
from entropy_lens.prompts.datasets import read_table
from entropy_lens.skipping.plan import write_plan
from entropy_lens.skipping.selection import calibrate_skips
from entropy_lens.workflow.jobs import job_model, lens_settings, setup_logging

setup_logging(snakemake)
skip, out = snakemake.params.skip, snakemake.output

table = read_table(snakemake.input.calibration, "mmlu")
fitted = dict(snakemake.input.items()).get("lens")  # the linear lens, where one is fitted: it chooses blocks too
with job_model(snakemake) as lm:
    found = calibrate_skips(
        lm,
        table,
        lens=lens_settings(snakemake),
        chat_template=snakemake.params.chat_template,
        ks=skip["ks"],
        seed=skip["seed"],
        n_boot=skip["n_boot"],
        variants=skip["variants"],
        translators=Translators.load(fitted) if fitted else None,
    )
write_plan(dataclasses.replace(found.plan, model=snakemake.wildcards.model), out.plan)
write_csv(found.per_question, out.delta_h)
write_csv(found.stability.assign(model=snakemake.wildcards.model), out.stability)
with open(out.protected, "w") as handle:
    json.dump(found.protected, handle, indent=2)
