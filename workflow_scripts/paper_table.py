"""Rule paper_table: every claim of the study, our 95% interval, the study's figure and a verdict."""

from pathlib import Path

from entropy_lens.core.tables import read_csv_table, write_csv, write_table
from entropy_lens.model.registry import folder_model_type
from entropy_lens.verdicts.mechanical import mark_mechanical
from entropy_lens.verdicts.nulls import nulls_table
from entropy_lens.verdicts.render import TERMINAL_WIDTH, display, terminal_table, verdicts_html, verdicts_markdown
from entropy_lens.verdicts.robustness import robustness_lines, with_robustness
from entropy_lens.verdicts.table import Expected, headline, paper_table_from_files, read_tables
from entropy_lens.verdicts.twins import twin_section, with_twins
from entropy_lens.workflow.jobs import setup_logging

REHEARSAL_WARNING = (
    "REHEARSAL: every model here is a tiny random-init stand-in (make rehearsal); these numbers come from random "
    "weights and mean nothing. The run proves only that every job of the paper's workflow executes.\n\n"
)

setup_logging(snakemake)
out = snakemake.output
# A rehearsal (config rehearsal: true) runs random-init stand-ins: every table says so before any verdict.
warning = REHEARSAL_WARNING if snakemake.params.rehearsal else ""

DRAWS = "draws_"
SIDE_INPUTS = ("models", "robustness", "twins")
inputs = dict(snakemake.input.items())
tables = {name: path for name, path in inputs.items() if name not in SIDE_INPUTS and DRAWS not in name}
draws = read_tables({name.removeprefix(DRAWS): path for name, path in inputs.items() if name.startswith(DRAWS)})
architectures = {Path(folder).name: folder_model_type(folder) for folder in snakemake.input.models}
expected = Expected(**snakemake.params.expected, architectures=architectures)
table = paper_table_from_files(tables, expected)
twins = inputs.get("twins")
if twins:  # twins: each learned-structure row read beyond its model's random-init twin (readings.TWIN)
    table = with_twins(table, read_csv_table(twins))
accuracy = read_tables({"accuracy": tables["accuracy"]})["accuracy"] if "accuracy" in tables else None
# Rows (with their twin readings), then their nulls (one row per reading: planted-null rates on the rows' own designs,
# planted-true rates), then the rows a null cannot be beaten on read as mechanical: decided before the headline.
nulls = nulls_table(table, draws=draws, accuracy=accuracy, expected=expected)
table = mark_mechanical(table, nulls)
write_table(
    table,
    out.csv,
    out.md,
    markdown=display(table),
    title=(warning.strip() + " " if warning else "") + "Entropy-Lens: every claim of the study, ours beside it",
)
top = headline(table)
lens_lines = ""
robustness = inputs.get("robustness")
if robustness:  # fitted_lens.profile_datasets: each verdict under the fitted lenses
    changes = read_csv_table(robustness, keep_default_na=False)
    top = with_robustness(top, changes, snakemake.params.expected["datasets"])
    lines = robustness_lines(changes)
    lens_lines = "\n## Under a fitted lens\n\n" + "\n".join(lines) + " Per row and block: lens_robustness.md.\n"
twin_text = twin_section(top) if twins else ""
write_csv(top, out.verdicts_csv)
Path(out.verdicts_md).write_text(
    warning + verdicts_markdown(top, "Verdicts: did each claim hold here?") + lens_lines + twin_text
)
Path(out.verdicts_html).write_text(
    (f"<p><strong>{warning.strip()}</strong></p>\n" if warning else "") + verdicts_html(top)
)
Path(out.verdicts_txt).write_text(
    warning + terminal_table(top) + (twin_section(top, width=TERMINAL_WIDTH) if twins else "")
)
write_table(
    nulls,
    out.nulls_csv,
    out.nulls_md,
    title="Every reading beside its null: observed, null, observed - null, the rule's planted-null rate and, where "
    "the null can reach the bar, its planted-true rate",
)
