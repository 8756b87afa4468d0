"""The vocabulary-tiled lens against exact references: float64 sums, full sorts, bool masks."""

import dataclasses
import math

import numpy as np
import pytest
import torch
from test_chunking import fake_lens_model

from entropy_lens.lens import decoding, metrics, nucleus
from entropy_lens.lens.stream import StreamResult, TileStream

ALPHAS = (0.0, 0.5, 1.0, 2.0, 5.0, math.inf)


def stream(logits: torch.Tensor, width: int, top_p: float, cap: int | None = None) -> StreamResult:
    """Feed ``[R, V]`` logits to a :class:`TileStream` in tiles of ``width`` tokens."""
    n_rows, vocab = logits.shape
    tiles = TileStream(n_rows, vocab, top_p=top_p, alphas=ALPHAS, cap=cap or vocab, device=logits.device)
    for start in range(0, vocab, width):
        tiles.add(logits[:, start : start + width].T.contiguous(), start)
    return tiles.finish()


def float64_reference(logits: torch.Tensor, top_p: float) -> dict[str, torch.Tensor]:
    """Entropies, Renyi entropies, top-p sizes and members from float64 softmax and a full sort."""
    logp = torch.log_softmax(logits.double(), -1)
    probs = logp.exp()
    renyi = []
    for a in ALPHAS:
        if a == 1.0:
            renyi.append(-(probs * logp).sum(-1))
        elif math.isinf(a):
            renyi.append(-logp.max(-1).values)
        elif a == 0.0:
            renyi.append(torch.log((probs > 0).sum(-1).double()))
        else:
            renyi.append(torch.log((probs**a).sum(-1)) / (1 - a))
    sorted_p, order = probs.sort(dim=-1, descending=True, stable=True)
    cum = sorted_p.cumsum(-1)
    size = (cum < top_p - nucleus.MASS_TOL).sum(-1) + 1
    # rows whose crossing lies within float32 rounding (of the streamed normalizer) of top_p
    near = cum.gather(1, torch.stack([size - 2, size - 1], 1).clamp_min(0)) - (top_p - nucleus.MASS_TOL)
    straddle = near.abs().min(-1).values < 1e-6
    return {
        "entropy": renyi[ALPHAS.index(1.0)],
        "renyi": torch.stack(renyi, -1),
        "size": size,
        "order": order,
        "straddle": straddle,
    }


# Probability mass that float32 rounding of logits up to |z| ~ 70 can move (2^-24 relative, ~4e-6 nats
# on the top token's log-probability), with room for a matmul that rounds differently.
LOGIT_ROUNDING_MASS = 1e-5
# At top_p = 1 a set ends deep in the tail, where float32 rounding of one logit product against another
# can move its last tokens (measured: up to 2 of 6000 on peaked rows, 1 on flat ones).
TAIL_TOKENS = 2


def mass_error(sizes: np.ndarray | torch.Tensor, logits: torch.Tensor, top_p: float) -> np.ndarray:
    """How far, in float64 probability mass, top-p sets of ``sizes`` ``[R]`` tokens are from exact.

    A set of ``k`` tokens is exact when its ``k - 1`` most probable tokens hold less than
    ``top_p - MASS_TOL`` and its ``k`` at least that; the error is the mass by which either fails (0 if exact).
    """
    probs = torch.softmax(logits.double(), -1).sort(-1, descending=True).values
    cum = torch.cat([probs.new_zeros(len(probs), 1), probs.cumsum(-1)], 1)  # [R, V + 1] mass of the top k
    k = torch.as_tensor(np.asarray(sizes)).long()[:, None]
    target = top_p - nucleus.MASS_TOL
    short, extra = target - cum.gather(1, k), cum.gather(1, (k - 1).clamp_min(0)) - target
    return torch.maximum(short, extra).clamp_min(0).squeeze(1).numpy()


def random_logits(rows: int, vocab: int, scale: float, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(rows, vocab, generator=gen) * scale


@pytest.mark.parametrize("scale", [0.3, 2.0, 15.0], ids=["flat", "medium", "peaked"])
@pytest.mark.parametrize("width", [1000, 997, 5000])
@pytest.mark.parametrize("top_p", [0.1, 0.6, 0.95])
def test_stream_matches_float64_reference(scale, width, top_p):
    logits = random_logits(12, 5000, scale, seed=1)
    got = stream(logits, width, top_p)
    ref = float64_reference(logits, top_p)
    torch.testing.assert_close(got.entropy.double(), ref["entropy"], atol=2e-5, rtol=0)
    torch.testing.assert_close(got.renyi.double(), ref["renyi"], atol=2e-5, rtol=1e-6)
    settled = (got.nucleus_size > 0) & ~ref["straddle"]
    assert bool(settled.any())
    torch.testing.assert_close(got.nucleus_size[settled], ref["size"][settled])
    torch.testing.assert_close(got.top1_id, logits.argmax(-1))
    # members of a settled set are its most probable tokens
    for row in torch.nonzero(settled).squeeze(-1).tolist():
        members = got.member_ids[got.member_rows == row].sort().values
        torch.testing.assert_close(members, ref["order"][row, : int(ref["size"][row])].sort().values)


def test_stream_rescales_when_the_maximum_grows():
    # ascending logits: every tile holds a new maximum, so every running sum is rescaled each time
    logits = torch.linspace(-30.0, 10.0, 4000).repeat(3, 1) + torch.arange(3.0)[:, None]
    got = stream(logits, 100, 0.6)
    ref = float64_reference(logits, 0.6)
    torch.testing.assert_close(got.renyi.double(), ref["renyi"], atol=2e-5, rtol=1e-6)
    torch.testing.assert_close(got.nucleus_size, ref["size"])
    assert got.top1_id.tolist() == [3999] * 3


def test_stream_leaves_wide_sets_open():
    # Flat rows: the top-p set holds most of the vocabulary, beyond a small candidate cap.
    logits = random_logits(6, 20000, 0.05, seed=2)
    got = stream(logits, 3000, 0.6, cap=4096)
    assert (got.nucleus_size == 0).all() and (got.top1_id == -1).all()
    torch.testing.assert_close(got.entropy.double(), float64_reference(logits, 0.6)["entropy"], atol=2e-5, rtol=0)


def test_ties_give_exact_sizes_and_first_argmax():
    logits = torch.randint(0, 4, (8, 3000), generator=torch.Generator().manual_seed(3)).float()
    for top_p in (0.3, 0.6, 1.0):
        got = stream(logits, 700, top_p)
        ref = float64_reference(logits, top_p)
        settled = (got.nucleus_size > 0) & ~ref["straddle"]
        torch.testing.assert_close(got.nucleus_size[settled], ref["size"][settled])
        torch.testing.assert_close(got.top1_id[settled], logits.argmax(-1)[settled])  # first of the tied maxima


def test_top_p_one_and_extreme_orders():
    # top_p = 1 closes a set once the mass reaches 1 - MASS_TOL. Flat rows need every token for
    # that, all above the candidate floor: the stream settles them at the full support. Peaked rows
    # reach it deep in a tail below the floor: the stream leaves them open for the full-row search
    # (test_decode_equals_the_exact_functions), never settles them at a partial size.
    flat, peaked = random_logits(3, 3000, 0.3, seed=4), random_logits(3, 3000, 3.0, seed=4)
    logits = torch.cat([flat, peaked])
    got = stream(logits, 512, 1.0)
    np.testing.assert_array_equal(float64_reference(flat, 1.0)["size"].numpy(), [3000] * 3)
    assert mass_error(torch.full((3,), 2999), flat, 1.0).min() > 1e-5  # one token less falls short
    assert got.nucleus_size.tolist() == [3000] * 3 + [0] * 3
    renyi = dict(zip(ALPHAS, got.renyi.double().unbind(-1), strict=True))
    torch.testing.assert_close(renyi[0.0], torch.full((6,), math.log(3000), dtype=torch.float64))
    torch.testing.assert_close(renyi[math.inf], float64_reference(logits, 1.0)["renyi"][:, -1], atol=1e-6, rtol=0)


def test_order_zero_counts_only_tokens_the_distribution_can_reach():
    """Rényi of order 0 is the log of the support: tokens with a -inf logit (soft-capped away, masked
    padding ids) are not in it, in whichever tile they fall."""
    logits = random_logits(4, 3000, 2.0, seed=9)
    banned = torch.rand(4, 3000, generator=torch.Generator().manual_seed(2)) < torch.tensor(
        [[0.0], [0.1], [0.5], [0.9]]
    )
    logits[banned] = -math.inf
    got = stream(logits, 700, 0.6)
    reachable = (~banned).sum(-1).double()
    torch.testing.assert_close(got.renyi.double()[:, ALPHAS.index(0.0)], reachable.log(), rtol=0, atol=1e-6)
    assert reachable.tolist()[0] == 3000 and reachable.tolist()[3] < 600  # the rows really differ from the vocab


def sets_from_masks(masks: torch.Tensor, list_max: int) -> nucleus.NucleusSets:
    """:class:`~entropy_lens.lens.nucleus.NucleusSets` of ``[R, V]`` masks, listing the sets of at most ``list_max``."""
    sizes = masks.sum(-1)
    bits = nucleus.membership_bits(masks.shape[0], masks.shape[1])
    rows, ids = torch.nonzero(masks, as_tuple=True)
    nucleus.set_bits(bits, rows, ids)
    listed = sizes[rows] <= list_max
    return nucleus.NucleusSets(sizes, bits, rows[listed], ids[listed])


@pytest.mark.parametrize("list_max", [0, 40, 10**9], ids=["bits only", "mixed", "lists"])
def test_adjacent_jaccard_is_exact(list_max):
    gen = torch.Generator().manual_seed(5)
    density = torch.tensor([0.001, 0.02, 0.5, 0.01, 0.9, 0.9, 0.003, 0.3])[:, None]
    masks = torch.rand(8, 1000, generator=gen) < density
    masks[:, 0] = True  # no empty set
    got = nucleus.adjacent_jaccard(sets_from_masks(masks, list_max))
    torch.testing.assert_close(got, nucleus.jaccard(masks[:-1], masks[1:]), rtol=0, atol=0)


def test_bitsets_round_trip():
    ids = torch.tensor([0, 63, 64, 127, 128, 999, 5, 63])
    rows = torch.tensor([0, 0, 0, 0, 1, 1, 2, 2])
    bits = nucleus.membership_bits(3, 1000)
    nucleus.set_bits(bits, rows, ids)
    assert nucleus.popcount(bits).sum(-1).tolist() == [4, 2, 2]
    for row, token in zip(rows.tolist(), ids.tolist(), strict=True):
        assert (int(bits[row, token // 64]) >> (token % 64)) & 1


def reference_decode(lm, resid: torch.Tensor, settings: decoding.LensSettings) -> dict[str, np.ndarray]:
    """All rows' full logits at once through the exact per-row functions and bool masks."""
    batch, n_layers, _ = resid.shape
    rm = metrics.row_metrics(
        decoding.lens_logits(lm, resid.reshape(batch * n_layers, -1)), top_p=settings.top_p, alphas=settings.alphas
    )
    jac = torch.cat([nucleus.jaccard(rm.nucleus_mask[:-1], rm.nucleus_mask[1:]), torch.full((1,), math.nan)])
    out = {k: getattr(rm, k).numpy() for k in ("entropy", "renyi", "nucleus_size", "top1_id")}
    out["nucleus_jaccard"] = jac.numpy()
    out = {k: v.reshape(batch, n_layers, *v.shape[1:]) for k, v in out.items()}
    out["nucleus_jaccard"][:, -1] = math.nan
    return out


# The unembedding's scale sets how peaked the rows are (a LayerNorm precedes it, so scaling the
# residual would not): 1 gives nearly uniform rows whose top-p sets outgrow the candidate cap (the
# full-row fallback), 3 sets of about 500 tokens and 30 sets of one or two, both settled by the stream.
SPREADS = {"wide sets (full-row fallback)": 1.0, "sets of hundreds (streamed)": 3.0, "narrow sets (streamed)": 30.0}
# Budgets in rows of logits: 2 -> chunks of 3 rows in 2 vocabulary tiles; 10 -> all 15 rows, 2 tiles;
# None -> all rows in one tile.
BUDGET_ROWS = {"chunks of 3 rows, 2 tiles": 2, "15 rows, 2 tiles": 10, "one tile": None}


@pytest.mark.parametrize("spread", SPREADS.values(), ids=SPREADS.keys())
@pytest.mark.parametrize("budget_rows", BUDGET_ROWS.values(), ids=BUDGET_ROWS.keys())
@pytest.mark.parametrize("top_p", [0.6, 1.0])
def test_decode_equals_the_exact_functions(spread, budget_rows, top_p):
    vocab = 6000
    lm = fake_lens_model(vocab=vocab, hidden=16, seed=1)
    lm.unembed.weight.data.mul_(spread)
    lm.unembed.bias = torch.nn.Parameter(torch.randn(vocab) * 0.1)
    resid = torch.randn(3, 5, 16, generator=torch.Generator().manual_seed(6)) * 3  # [B, L, d]
    budget = 10**9 if budget_rows is None else budget_rows * vocab * metrics.bytes_per_logit()
    settings = decoding.LensSettings(top_p=top_p, alphas=(0.5, 1.0, 5.0, math.inf), budget_bytes=budget)
    plan = decoding.plan_tiles(15, vocab, budget)
    assert (plan.width < vocab) == (budget_rows is not None) and (plan.rows < 15) == (budget_rows == 2)
    logits = decoding.lens_logits(lm, resid.reshape(15, 16))
    # The case is what its name says: the stream settles every set or none (top_p = 1 reaches the tail).
    streamed = stream(logits, plan.width, top_p, cap=plan.cap).nucleus_size > 0
    assert bool(streamed.all() if spread > 1.0 and top_p < 1.0 else not streamed.any())
    got = decoding.decode_residuals(lm, resid, settings)
    ref = reference_decode(lm, resid, settings)
    np.testing.assert_array_equal(got.top1_id, ref["top1_id"])
    if top_p < 1.0:  # every crossing is clear of float32 rounding: sizes and overlaps are exact
        np.testing.assert_array_equal(got.nucleus_size.ravel(), float64_reference(logits, top_p)["size"].numpy())
        np.testing.assert_array_equal(got.nucleus_size, ref["nucleus_size"])
        np.testing.assert_array_equal(got.nucleus_jaccard, ref["nucleus_jaccard"])
    # top_p = 1: a set ends where the mass reaches 1 - MASS_TOL, which the float32 logits of peaked rows
    # place only to within their rounding (a tile product and the full-row one round differently); each
    # set must still hold that mass. Flat rows' tokens outweigh the rounding: their sizes are exact.
    error = mass_error(got.nucleus_size.ravel(), logits, top_p)
    assert error.max() <= LOGIT_ROUNDING_MASS
    assert (error == 0).all() or spread > 1.0
    # ... and, mass aside, the sizes and overlaps are the full-row ones up to the two tail tokens that
    # rounding can move: a set grown to the whole vocabulary (mass short of 1 - MASS_TOL by rounding) fails.
    np.testing.assert_allclose(got.nucleus_size, ref["nucleus_size"], rtol=0, atol=TAIL_TOKENS)
    np.testing.assert_allclose(got.nucleus_jaccard, ref["nucleus_jaccard"], rtol=0, atol=2e-3)
    for name in ("entropy", "renyi"):
        np.testing.assert_allclose(getattr(got, name), ref[name], atol=5e-5, err_msg=name)


def test_softcap_is_applied_per_tile():
    vocab, cap = 6000, 2.0
    lm = fake_lens_model(vocab=vocab, hidden=16, seed=2)
    lm.unembed.weight.data.mul_(30.0)  # peaked rows: entropy near 0 without the cap
    capped = dataclasses.replace(lm, softcap=cap)
    resid = torch.randn(2, 4, 16, generator=torch.Generator().manual_seed(7))
    settings = decoding.LensSettings(budget_bytes=2 * vocab * metrics.bytes_per_logit())
    assert decoding.plan_tiles(8, vocab, settings.budget_bytes).width < vocab  # several tiles
    got = decoding.decode_residuals(capped, resid, settings)
    ref = reference_decode(capped, resid, settings)
    np.testing.assert_array_equal(got.nucleus_size, ref["nucleus_size"])
    np.testing.assert_allclose(got.entropy, ref["entropy"], atol=5e-5)
    # Logits within (-cap, cap) give no token more than e^(2 cap) / V: H >= -log max p >= log V - 2 cap.
    floor = math.log(vocab) - 2 * cap
    assert float(got.entropy.min()) >= floor
    assert float(decoding.decode_residuals(lm, resid, settings).entropy.max()) < floor  # what the cap lifts


@pytest.mark.parametrize(("n_rows", "vocab"), [(144, 262144), (480, 49152), (35, 3000), (2304, 151936)])
@pytest.mark.parametrize("budget", [3 * 262144 * 48, 48 * 2**20, 512 * 2**20])
def test_plans_respect_the_budget(n_rows, vocab, budget):
    plan = decoding.plan_tiles(n_rows, vocab, budget)
    assert plan.bytes(vocab) <= budget
    assert 1 <= plan.rows <= n_rows and 1 <= plan.width <= vocab


@pytest.mark.parametrize("list_max", [0, 40, 10**9], ids=["bits only", "mixed", "lists"])
def test_pair_jaccard_is_exact_for_any_pairs(list_max):
    gen = torch.Generator().manual_seed(7)
    density = torch.tensor([0.001, 0.02, 0.5, 0.01, 0.9, 0.9, 0.003, 0.3])[:, None]
    masks = torch.rand(8, 1000, generator=gen) < density
    masks[:, 0] = True
    left, right = torch.tensor([0, 2, 5, 7, 3]), torch.tensor([6, 4, 2, 1, 0])
    got = nucleus.pair_jaccard(sets_from_masks(masks, list_max), left, right)
    torch.testing.assert_close(got, nucleus.jaccard(masks[left], masks[right]), rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"pair_jaccard needs 2 distinct rows in right; got \[1, 1\]"):
        nucleus.pair_jaccard(sets_from_masks(masks, list_max), torch.tensor([0, 2]), torch.tensor([1, 1]))


@pytest.mark.parametrize("spread", [1.0, 30.0], ids=["wide sets (full rows)", "narrow sets (streamed)"])
@pytest.mark.parametrize("budget_rows", [2, None], ids=["chunks of 3 rows, 2 tiles", "one tile"])
def test_cross_prompt_overlap_is_the_exact_jaccard_with_the_partner_next_layer(spread, budget_rows):
    vocab = 6000
    lm = fake_lens_model(vocab=vocab, hidden=16, seed=1)
    lm.unembed.weight.data.mul_(spread)
    resid = torch.randn(3, 5, 16, generator=torch.Generator().manual_seed(6)) * 3  # [B, L, d]
    budget = 10**9 if budget_rows is None else budget_rows * vocab * metrics.bytes_per_logit()
    settings = decoding.LensSettings(top_p=0.6, budget_bytes=budget)
    assert (decoding.plan_tiles(15, vocab, budget).rows < 15) == (budget_rows is not None)
    got = decoding.decode_residuals(lm, resid, settings, torch.tensor([2, -1, 0]))
    masks = metrics.row_metrics(decoding.lens_logits(lm, resid.reshape(15, 16)), top_p=0.6, alphas=(1.0,))
    masks = masks.nucleus_mask.reshape(3, 5, vocab)
    want = np.full((3, 5), np.nan, dtype=np.float32)
    for row, partner in ((0, 2), (2, 0)):
        want[row, :-1] = nucleus.jaccard(masks[row, :-1], masks[partner, 1:]).numpy()
    np.testing.assert_array_equal(got.nucleus_jaccard_cross, want)
    assert np.isfinite(want[[0, 2], :-1]).all() and (want[[0, 2], :-1] < 1).any()  # a real comparison
    plain = decoding.decode_residuals(lm, resid, settings)
    assert plain.nucleus_jaccard_cross is None
    for name in ("nucleus_size", "nucleus_jaccard", "top1_id", "entropy"):
        np.testing.assert_array_equal(getattr(got, name), getattr(plain, name), err_msg=name)
    with pytest.raises(ValueError, match=r"partner must be \[B\] rows in -1..B-1, got \[3, 0, 1\]"):
        decoding.decode_residuals(lm, resid, settings, torch.tensor([3, 0, 1]))
