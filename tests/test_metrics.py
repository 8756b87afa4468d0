"""Metric properties against float64 references (pure tensor functions, no models)."""

import math

import pytest
import torch
from test_tiling import mass_error

from entropy_lens.lens import entropy, nucleus


def ref_probs(logits: torch.Tensor) -> torch.Tensor:
    return torch.softmax(logits.double(), dim=-1)


# Probability mass float32 cannot place in a cumulative sum near 1 (2^-24 per term; measured <= 2.2e-7).
FLOAT32_MASS = 5e-7


def ref_nucleus_size(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    probs, _ = ref_probs(logits).sort(dim=-1, descending=True)
    return (probs.cumsum(-1) < top_p - nucleus.MASS_TOL).sum(-1) + 1


@pytest.fixture(params=[0.3, 2.0, 15.0], ids=["flat", "medium", "peaked"])
def logits(request) -> torch.Tensor:
    gen = torch.Generator().manual_seed(7)
    return torch.randn(24, 5000, generator=gen) * request.param


def test_entropy_matches_float64_and_is_bounded(logits):
    probs = ref_probs(logits)
    ref = -(probs * probs.log()).sum(-1)
    got = entropy.shannon_entropy(logits)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), ref, atol=1e-4, rtol=0)
    assert bool((got >= 0).all()) and bool((got <= math.log(logits.shape[-1]) + 1e-5).all())


@pytest.mark.parametrize("alpha", [0.0, 0.5, 2.0, 5.0, math.inf])
def test_renyi_matches_definition(logits, alpha):
    probs = ref_probs(logits)
    if math.isinf(alpha):
        ref = -probs.max(-1).values.log()
    elif alpha == 0:
        ref = torch.log((probs > 0).sum(-1).double())
    else:
        ref = torch.log((probs**alpha).sum(-1)) / (1 - alpha)
    torch.testing.assert_close(entropy.renyi_entropy(logits, alpha).double(), ref, atol=2e-4, rtol=1e-5)


def test_renyi_orders_are_monotone_and_bounded(logits):
    values = torch.stack([entropy.renyi_entropy(logits, a) for a in (0.0, 0.5, 1.0, 5.0, math.inf)])
    assert bool((values[:-1] + 1e-4 >= values[1:]).all()), "Renyi entropy must not increase with alpha"
    assert bool((values <= math.log(logits.shape[-1]) + 1e-4).all())


def test_renyi_at_and_near_one_is_float64_shannon(logits):
    probs = ref_probs(logits)
    shannon = -(probs * probs.log()).sum(-1)  # float64, from the definition, sharing no code with the lens
    torch.testing.assert_close(entropy.renyi_entropy(logits, 1.0).double(), shannon, atol=1e-4, rtol=0)
    for alpha in (1 - 1e-3, 1 + 1e-3):
        torch.testing.assert_close(entropy.renyi_entropy(logits, alpha).double(), shannon, atol=5e-3, rtol=0)


def test_renyi_at_zero_is_the_log_of_the_support():
    logits = torch.randn(6, 1000, generator=torch.Generator().manual_seed(8)) * 5
    excluded = [0, 1, 17, 500, 999, 998]  # tokens given zero probability (-inf logits), per row
    for row, n in enumerate(excluded):
        logits[row, torch.randperm(1000, generator=torch.Generator().manual_seed(row))[:n]] = -math.inf
    support = torch.tensor([math.log(1000 - n) for n in excluded], dtype=torch.float64)
    torch.testing.assert_close(entropy.renyi_entropy(logits, 0.0).double(), support, atol=1e-6, rtol=0)


@pytest.mark.parametrize("top_p", [0.1, 0.6, 0.95, 1.0])
def test_nucleus_size_matches_sorted_reference(logits, top_p):
    size, mask = nucleus.nucleus(logits, top_p)
    ref = ref_nucleus_size(logits, top_p)
    # Sizes are exact where the float64 set's last token holds more mass than float32 resolves in a
    # cumulative sum near 1; a lighter one (peaked rows at top_p = 1) float32 may count or not, but
    # the set must still hold its mass to within that rounding, on either side.
    # Likewise where the float64 set's mass lies within that rounding of the threshold itself: float32 sums
    # (whose order follows the CPU's vector width) may put it on either side (measured on an AVX2 host: one
    # row of 24 at top_p = 0.95, its float64 mass 5.8e-8 above the threshold, counted one token longer).
    probs, _ = ref_probs(logits).sort(dim=-1, descending=True)
    unresolved = probs.gather(1, (ref - 1)[:, None]).squeeze(1) < FLOAT32_MASS
    at_threshold = (probs.cumsum(-1).gather(1, (ref - 1)[:, None]).squeeze(1) - (top_p - nucleus.MASS_TOL)).abs()
    assert bool(((size == ref) | unresolved | (at_threshold < FLOAT32_MASS)).all())
    assert bool((((size - ref).abs() <= 1) | unresolved).all())  # at the threshold: one token either way
    assert (mass_error(size, logits, top_p) <= FLOAT32_MASS).all()
    if top_p < 1.0 or logits.std() < 1.0:  # flat rows at top_p = 1 too: every set is the whole support
        assert not bool(unresolved.any())
    assert bool((mask.sum(-1) == size).all())
    # The set is the top of the distribution: every member outranks every non-member.
    lowest_in = torch.where(mask, logits, math.inf).min(-1).values
    highest_out = torch.where(mask, -math.inf, logits).max(-1).values
    assert bool((lowest_in >= highest_out).all())


def test_nucleus_large_vocab_exercises_histogram_refinement():
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(6, 120_000, generator=gen) * 0.5  # thousands of tokens per nucleus
    size, _ = nucleus.nucleus(logits, 0.6)
    ref = ref_nucleus_size(logits, 0.6)
    assert int(size.min()) > nucleus._MAX_CANDIDATES
    assert bool(((size - ref).abs() <= 1).all())


def test_nucleus_edge_cases():
    uniform = torch.zeros(1, 8)
    assert nucleus.nucleus(uniform, 1.0)[0].item() == 8
    assert nucleus.nucleus(uniform, 0.5)[0].item() == 4  # ties: exactly half the mass
    assert nucleus.nucleus(uniform, 0.3)[0].item() == 3
    one_hot = torch.full((1, 8), -1e4)
    one_hot[0, 5] = 0.0
    size, mask = nucleus.nucleus(one_hot, 1.0)
    assert size.item() == 1 and mask[0, 5]


def test_one_hot_entropy_is_zero():
    one_hot = torch.full((2, 50), -1e4)
    one_hot[:, 3] = 0.0
    assert entropy.shannon_entropy(one_hot).abs().max().item() < 1e-6
    assert nucleus.nucleus(one_hot, 0.6)[0].tolist() == [1, 1]


@pytest.mark.parametrize("vocab", [64, 4096, 13, 1001])
def test_count_true_matches_a_plain_sum(vocab):
    gen = torch.Generator().manual_seed(vocab)
    for density in (0.0, 0.01, 0.5, 1.0):  # 1.0: every byte of every word set
        mask = torch.rand(9, vocab, generator=gen) < density
        expected = mask.long().sum(-1)
        torch.testing.assert_close(nucleus.count_true(mask), expected)
        torch.testing.assert_close(nucleus.count_true(mask[1:]), expected[1:])  # offset rows
        torch.testing.assert_close(nucleus.count_true(mask[:, 1:]), mask[:, 1:].long().sum(-1))  # offset columns
        torch.testing.assert_close(nucleus.count_true(mask.T.contiguous().T), expected)  # column-major


def test_jaccard():
    a = torch.tensor([[1, 1, 0, 0], [1, 0, 0, 0]], dtype=torch.bool)
    b = torch.tensor([[0, 1, 1, 0], [1, 0, 0, 0]], dtype=torch.bool)
    torch.testing.assert_close(nucleus.jaccard(a, b), torch.tensor([1 / 3, 1.0]))


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5, float("nan")])
def test_bad_top_p_is_refused(bad):
    with pytest.raises(ValueError, match="top_p must lie in"):
        nucleus.nucleus(torch.zeros(1, 4), bad)


def test_bad_alpha_is_refused():
    with pytest.raises(ValueError, match=r"alpha must be >= 0.*-0.5"):
        entropy.renyi_entropy(torch.zeros(1, 4), -0.5)
    with pytest.raises(ValueError, match="at least one"):
        entropy.check_alphas([])
