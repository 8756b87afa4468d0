"""``entropy-lens profile``'s text: per prompt, the generation and its entropy profile over depth."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import xarray as xr

SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float], lo: float, hi: float) -> str:
    """One block character per value, scaled between ``lo`` and ``hi`` (NaN as space)."""
    span = max(hi - lo, 1e-12)
    chars = []
    for v in values:
        if not math.isfinite(v):
            chars.append(" ")
            continue
        chars.append(SPARK[min(int((v - lo) / span * len(SPARK)), len(SPARK) - 1)])
    return "".join(chars)


def render_profile(ds: xr.Dataset, decode) -> str:
    """Generated text, then per layer: depth, mean entropy, nucleus size, top-1 token."""
    lines = []
    for i, pid in enumerate(ds.prompt.values):
        row = ds.isel(prompt=i)
        ids = [int(t) for t in row.token_id.values if t >= 0]
        entropy = row.entropy.mean("token", skipna=True).values
        vmax = math.log(int(ds.attrs["vocab_size"]))
        lines += [f"[{pid}] {row.prompt_text.item()!s}", f"  -> {decode(ids)!r}", ""]
        lines.append(f"  mean entropy over depth (0 .. log V = {vmax:.2f} nats): {sparkline(entropy, 0.0, vmax)}")
        lines.append("  layer  depth  H [nats]  nucleus  top-1 (first token)")
        for layer in range(ds.sizes["layer"]):
            cell = row.isel(layer=layer)
            top1 = decode([int(cell.top1_id.values[0])]) if cell.top1_id.values[0] >= 0 else ""
            lines.append(
                f"  {layer:5d}  {float(cell.depth):5.2f}  {entropy[layer]:8.3f}  "
                f"{np.nanmedian(np.where(cell.nucleus_size.values >= 0, cell.nucleus_size.values, np.nan)):7.0f}  "
                f"{top1!r}"
            )
        lines.append("")
    return "\n".join(lines)
