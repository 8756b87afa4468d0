"""Stand-in for an analysis rule: reads the store's chunks and writes a table."""

import json
from pathlib import Path

import numpy as np

store = Path(snakemake.input[0])  # noqa: F821
decimals = int(snakemake.params.decimals)  # noqa: F821
if snakemake.params.fail:  # noqa: F821
    raise RuntimeError("summarize failed on purpose (config fail_summarize: true)")
meta = json.loads((store / "entropy" / "zarr.json").read_text())
chunks = sorted((store / "entropy" / "c").iterdir(), key=lambda p: int(p.name))
values = np.concatenate([np.frombuffer(c.read_bytes(), dtype="<f8") for c in chunks]).reshape(meta["shape"])
lines = ["layer,mean"] + [f"{layer},{m:.{decimals}f}" for layer, m in enumerate(values.mean(axis=0))]
Path(snakemake.output[0]).write_text("\n".join(lines) + "\n")  # noqa: F821
Path(snakemake.log[0]).write_text("ok\n")  # noqa: F821
