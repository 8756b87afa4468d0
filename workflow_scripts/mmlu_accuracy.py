"""Rule mmlu_accuracy: accuracy per model, style and measure with Wilson intervals and the letter bias."""

from entropy_lens.answers.accuracy import accuracy_table
from entropy_lens.core.tables import read_frames, write_table
from entropy_lens.plots.accuracy import plot_letter_bias
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
out = snakemake.output

table = accuracy_table(read_frames(snakemake.input))
write_table(table, out.csv, out.md, title="MMLU accuracy, 95% Wilson intervals over questions, and the letter bias")
plot_letter_bias(table, out.png)
