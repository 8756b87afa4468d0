"""Stand-in for a GPU extraction rule: writes a small Zarr-v3-like directory (metadata + chunk files)."""

import json
from pathlib import Path

import numpy as np

CHUNK_ROWS = 2

prompts = Path(snakemake.input[0]).read_text().splitlines()[1:]  # noqa: F821
scale = float(snakemake.params.scale)  # noqa: F821
store = Path(snakemake.output[0])  # noqa: F821
values = scale * np.array([[len(p) + layer for layer in range(3)] for p in prompts], dtype="<f8")
array_dir = store / "entropy"
(array_dir / "c").mkdir(parents=True)
(store / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}}))
meta = {"zarr_format": 3, "node_type": "array", "shape": list(values.shape), "data_type": "float64"}
(array_dir / "zarr.json").write_text(json.dumps(meta))
for i, start in enumerate(range(0, len(values), CHUNK_ROWS)):
    (array_dir / "c" / str(i)).write_bytes(values[start : start + CHUNK_ROWS].tobytes())
Path(snakemake.log[0]).write_text(f"wrote {values.shape} to {store}\n")  # noqa: F821
