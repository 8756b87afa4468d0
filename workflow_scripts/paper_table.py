"""Rule paper_table: every claim of the study, our 95% interval, the study's figure and a verdict."""

from pathlib import Path

from entropy_lens.analysis.paper import (
    Expected,
    display,
    headline,
    paper_table_from_files,
    verdicts_html,
    verdicts_markdown,
)
from entropy_lens.core.tables import write_table
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
out = snakemake.output

table = paper_table_from_files(dict(snakemake.input.items()), Expected(**snakemake.params.expected))
write_table(
    table, out.csv, out.md, markdown=display(table), title="Entropy-Lens: every claim of the study, ours beside it"
)
top = headline(table)
top.to_csv(out.verdicts_csv, index=False)
Path(out.verdicts_md).write_text(verdicts_markdown(top, "Verdicts: did each claim hold here?"))
Path(out.verdicts_html).write_text(verdicts_html(top))
