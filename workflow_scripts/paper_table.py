"""Rule paper_table: every claim of the study, our 95% interval, the study's figure and a verdict."""

from entropy_lens.analysis.paper import Expected, display, headline, paper_table_from_files, verdicts_html
from entropy_lens.workflow.jobs import setup_logging
from entropy_lens.workflow.tables import write_table

setup_logging(snakemake)
out = snakemake.output

table = paper_table_from_files(dict(snakemake.input.items()), Expected(**snakemake.params.expected))
write_table(
    table, out.csv, out.md, markdown=display(table), title="Entropy-Lens: every claim of the study, ours beside it"
)
top = headline(table)
write_table(top, out.verdicts_csv, out.verdicts_md, markdown=display(top), title="Verdicts: did each claim hold here?")
with open(out.verdicts_html, "w") as handle:
    handle.write(verdicts_html(top))
