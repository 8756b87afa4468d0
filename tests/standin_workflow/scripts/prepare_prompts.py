"""Stand-in for a dataset rule: writes a small prompt table."""

from pathlib import Path

n_prompts = int(snakemake.params.n_prompts)  # noqa: F821
output = Path(snakemake.output[0])  # noqa: F821
rows = ["prompt,text"] + [f"p{i},the cat sat {i}" for i in range(n_prompts)]
output.write_text("\n".join(rows) + "\n")
Path(snakemake.log[0]).write_text(f"wrote {n_prompts} prompts\n")  # noqa: F821
