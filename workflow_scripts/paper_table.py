"""Rule paper_table: every claim of the study, our 95% interval, the study's figure and a verdict."""

from pathlib import Path

from entropy_lens.core.tables import read_csv_table, write_csv, write_table
from entropy_lens.model.registry import folder_model_type
from entropy_lens.verdicts.nulls import nulls_table
from entropy_lens.verdicts.render import TERMINAL_WIDTH, display, terminal_table, verdicts_html, verdicts_markdown
from entropy_lens.verdicts.robustness import robustness_lines, with_robustness
from entropy_lens.verdicts.table import Expected, headline, paper_table_from_files
from entropy_lens.verdicts.twins import twin_section, with_both, with_twins
from entropy_lens.workflow.jobs import setup_logging

REHEARSAL_WARNING = (
    "REHEARSAL: every model here is a tiny random-init stand-in (make rehearsal); these numbers come from random "
    "weights and mean nothing. The run proves only that every job of the paper's workflow executes.\n\n"
)

setup_logging(snakemake)
out = snakemake.output
# A rehearsal (config rehearsal: true) runs random-init stand-ins: every table says so before any verdict.
warning = REHEARSAL_WARNING if snakemake.params.rehearsal else ""

tables = {name: path for name, path in snakemake.input.items() if name not in ("models", "robustness", "twins")}
architectures = {Path(folder).name: folder_model_type(folder) for folder in snakemake.input.models}
table = paper_table_from_files(tables, Expected(**snakemake.params.expected, architectures=architectures))
twins = dict(snakemake.input.items()).get("twins")
if twins:  # twins: each learned-structure row beside its model's random-init twin
    table = with_twins(table, read_csv_table(twins))
write_table(
    table,
    out.csv,
    out.md,
    markdown=display(table),
    title=(warning.strip() + " " if warning else "") + "Entropy-Lens: every claim of the study, ours beside it",
)
top = headline(table)
lens_lines = ""
robustness = dict(snakemake.input.items()).get("robustness")
if robustness:  # fitted_lens.profile_datasets: each verdict under the fitted lenses
    changes = read_csv_table(robustness, keep_default_na=False)
    top = with_robustness(top, changes, snakemake.params.expected["datasets"])
    lines = robustness_lines(changes)
    lens_lines = "\n## Under a fitted lens\n\n" + "\n".join(lines) + " Per row and block: lens_robustness.md.\n"
if twins:  # "beyond its null" is beyond both the null and the twin; which claims a random network shows
    top = with_both(top)
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
    nulls_table(table),
    out.nulls_csv,
    out.nulls_md,
    title="Every rule beside its null: observed, null, observed - null, and the rule's planted-null rate",
)
