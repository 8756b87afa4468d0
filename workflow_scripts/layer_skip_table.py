"""Rule layer_skip_table: accuracy per condition (Wilson) and paired expansion-vs-random/pruning differences."""

from entropy_lens.answers.accuracy import skip_tables
from entropy_lens.core.tables import read_frames, write_table
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
out = snakemake.output

correct = read_frames(snakemake.input)
accuracy, differences = skip_tables(correct, n_boot=snakemake.params.n_boot, seed=snakemake.params.seed)
write_table(accuracy, out.csv, out.md, title="MMLU accuracy under layer skipping (95% Wilson intervals)")
write_table(
    differences,
    out.differences,
    out.differences_md,
    title="expansion minus random / pruning skips, paired over questions (95% bootstrap)",
)
