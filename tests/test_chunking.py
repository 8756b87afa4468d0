"""Chunked and tiled lens decoding: same numbers as unchunked, and peak memory set by the budget."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from entropy_lens.lens import decoding, metrics
from entropy_lens.model.lens_model import LensModel


def fake_lens_model(vocab: int, hidden: int = 32, seed: int = 0) -> LensModel:
    """Just the lens parts (norm, unembedding) of a model; enough for decode_residuals."""
    torch.manual_seed(seed)
    unembed = nn.Linear(hidden, vocab, bias=False)
    norm = nn.LayerNorm(hidden)
    return LensModel(nn.Identity(), None, "fake", "tests", "", "none", nn.ModuleList(), norm, unembed, None)


@pytest.mark.parametrize("weight_scale", [1.0, 30.0], ids=["wide sets (full rows)", "narrow sets (streamed)"])
def test_chunked_equals_unchunked(weight_scale):
    lm = fake_lens_model(vocab=20000)
    lm.unembed.weight.data.mul_(weight_scale)
    resid = torch.randn(5, 7, 32, generator=torch.Generator().manual_seed(1)) * 3  # [B, L, d]
    per_row = 20000 * metrics.bytes_per_logit()
    budget = 3 * per_row
    plan = decoding.plan_tiles(35, 20000, budget)
    assert plan.rows < 35 and plan.width < 20000  # cuts rows and the vocabulary
    small = decoding.decode_residuals(lm, resid, decoding.LensSettings(budget_bytes=budget))
    whole = decoding.decode_residuals(lm, resid, decoding.LensSettings(budget_bytes=10**9))
    for name in ("nucleus_size", "nucleus_jaccard", "top1_id"):
        np.testing.assert_array_equal(getattr(small, name), getattr(whole, name), err_msg=name)
    # A float32 sum may be split differently for other tiles or rows (threads, vector width of the
    # CPU); its rounding is bounded by V * eps relative, and near-zero entropies by float32 ulps of 1.
    for name in ("entropy", "renyi"):
        np.testing.assert_allclose(getattr(small, name), getattr(whole, name), rtol=4e-4, atol=1e-6, err_msg=name)
    assert np.isnan(small.nucleus_jaccard[:, -1]).all() and np.isfinite(small.nucleus_jaccard[:, :-1]).all()


PROBE = textwrap.dedent(
    """
    import json, sys, torch
    sys.path.insert(0, {tests!r})
    from test_chunking import fake_lens_model
    from entropy_lens.lens import decoding
    torch.set_num_threads(1)
    flat = fake_lens_model(vocab=262144, hidden=64)  # top-p sets of ~half the vocabulary: full rows
    peaked = fake_lens_model(vocab=262144, hidden=64)
    peaked.unembed.weight.data.mul_(30)  # top-p sets of a few tokens: streamed tiles alone
    resid = torch.randn(4, 16, 64)
    def peak():  # this process's own high-water mark; ru_maxrss would carry the forking parent's over exec
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
    # Warm up every code path on one row first: the first call pages in library code (kernels, allocator
    # arenas) that RSS counts once and that is not the lens's memory.
    for lm in (flat, peaked):
        decoding.decode_residuals(lm, resid[:1, :1], decoding.LensSettings(budget_bytes={budget}))
    out = {{}}
    for name, lm, budget in (("flat", flat, {budget}), ("peaked", peaked, {budget}), ("whole", flat, 2**40)):
        before = peak()
        decoding.decode_residuals(lm, resid, decoding.LensSettings(budget_bytes=budget))
        out[name] = peak() - before
    print(json.dumps(out))
    """
)


def test_peak_memory_follows_the_budget():
    budget = 48 * 2**20
    script = PROBE.format(tests=str(Path(__file__).parent), budget=budget)
    # glibc serves freed large blocks from its heap after raising its mmap threshold, so peak RSS
    # would count memory the allocator kept (95-184 MiB over three runs here); a fixed threshold makes
    # every large block an mmap returned on free, so RSS follows live tensors (65 MiB, every run).
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(64 * 2**10)}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True, env=env
    )
    extra = json.loads(out.stdout.strip().splitlines()[-1])
    # 64 rows x 262144 vocab decoded at once needs ~670 MB; in chunks and tiles it stays near the budget.
    assert extra["flat"] < budget + 32 * 2**20, extra
    assert extra["peaked"] < budget + 32 * 2**20, extra
    assert extra["whole"] > 5 * budget, extra
