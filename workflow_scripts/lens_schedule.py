"""Rule lens_schedule: one model's entropy schedule under the logit lens and each fitted lens, on the held-out
tokens their KL is measured on: ΔH and KL per block, the blocks each lens selects, and the lenses' agreement."""

import pandas as pd

from entropy_lens.analysis.lens_fit import final_readings
from entropy_lens.analysis.schedule import choices_table, schedule_table
from entropy_lens.analysis.schedule_agreement import agreement_table
from entropy_lens.core.tables import write_csv
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
model, out, params = snakemake.wildcards.model, snakemake.output, snakemake.params

readings, prompts = final_readings([pd.read_parquet(path) for path in snakemake.input])
boot = {"n_boot": params.n_boot, "seed": params.seed}
schedule = schedule_table(readings, prompts, model=model, **boot)
write_csv(schedule, out.schedule)
write_csv(choices_table(schedule, params.variants), out.choices)
write_csv(agreement_table(readings, prompts, schedule, model=model, **boot), out.agreement)
