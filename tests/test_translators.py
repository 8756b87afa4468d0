"""Lenses fitted to the model: the linear lens against an independent least-squares fit, the tuned lens
trained a few steps, and exactness at the final block for every kind."""

from __future__ import annotations

import weakref

import numpy as np
import pytest
import torch
from tiny import tiny_model

from entropy_lens.lens import held_out as held_out_module
from entropy_lens.lens.decoding import lens_logits
from entropy_lens.lens.fitting import corpus_residuals, fit_linear, fit_tuned, kl_divergence
from entropy_lens.lens.held_out import held_out_kl
from entropy_lens.lens.translators import Translators, identity

# Word-level prompts of the tiny tokenizer, 12-16 tokens each: 40 prompts, ~560 tokens for a width of 32.
WORDS = "the a once upon time there was little girl boy cat dog who loved to play in park and sun moon".split()


def corpus(n: int, seed: int, tok) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(11, 16)))) for _ in range(n)]
    return [tok(t)["input_ids"] for t in texts]


@pytest.fixture(scope="module")
def lm():
    return tiny_model("llama", seed=3, scale=2.0, n_layers=4)


def _stacked(lm, prompts) -> tuple[np.ndarray, np.ndarray]:
    parts = [(owner, resid.double().numpy()) for owner, resid in corpus_residuals(lm, prompts, batch_size=5)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def test_the_corpus_is_every_real_position_of_every_block(lm):
    prompts = corpus(6, 0, lm.tokenizer)
    owner, resid = _stacked(lm, prompts)
    assert resid.shape == (sum(map(len, prompts)), lm.n_layers, 32)
    assert np.bincount(owner).tolist() == [len(p) for p in prompts]
    # the same as a forward pass of each prompt alone (no padding), block outputs from transformers' own list
    for i in (0, 5):
        with torch.inference_mode():
            out = lm.model(torch.tensor([prompts[i]]), output_hidden_states=True)
        blocks = torch.stack(out.hidden_states[1:-1], 2)[0].double().numpy()  # blocks 0..L-2 (the last is normed)
        np.testing.assert_allclose(resid[owner == i][:, :-1], blocks, rtol=1e-5, atol=1e-4)  # padding rounds


def test_linear_equals_an_independent_float64_least_squares_fit(lm):
    prompts = corpus(40, 1, lm.tokenizer)
    fitted = fit_linear(lm, prompts, batch_size=8, provenance={"corpus": "test words", "seed": 1})
    _, resid = _stacked(lm, prompts)
    x = np.concatenate([resid[:, :-1], np.ones((len(resid), lm.n_layers - 1, 1))], -1)
    for layer in range(lm.n_layers - 1):
        solution = np.linalg.lstsq(x[:, layer], resid[:, -1], rcond=None)[0]
        np.testing.assert_allclose(fitted.weight[layer].numpy(), solution[:-1], atol=2e-4)
        np.testing.assert_allclose(fitted.bias[layer].numpy(), solution[-1], atol=2e-4)
    assert fitted.provenance["tokens"] == len(resid) and fitted.provenance["prompts"] == 40
    assert fitted.provenance["corpus"] == "test words" and fitted.provenance["dtype"] == "float32"
    # on the corpus it was fitted to, it maps every block nearer the final residual than the identity does
    mapped = fitted.apply(torch.from_numpy(resid).float()).double().numpy()
    for layer in range(lm.n_layers - 1):
        assert np.square(mapped[:, layer] - resid[:, -1]).sum() < np.square(resid[:, layer] - resid[:, -1]).sum()


@pytest.mark.parametrize("kind", ["logit", "linear", "tuned"])
def test_the_final_block_reads_the_models_own_logits_under_every_kind(lm, kind):
    prompts = corpus(12, 2, lm.tokenizer)
    translators = {
        "logit": lambda: identity(lm.n_layers, 32),
        "linear": lambda: fit_linear(lm, prompts),
        "tuned": lambda: fit_tuned(lm, prompts, steps=2, batch_size=4).translators,
    }[kind]()
    assert torch.equal(translators.weight[-1], torch.eye(32)) and not translators.bias[-1].any()
    ids = torch.tensor([prompts[0]])
    with torch.inference_mode():
        own = lm.model(ids).logits[0].float()
    _, resid = next(corpus_residuals(lm, [prompts[0]]))
    lensed = lens_logits(lm, translators.apply(resid)[:, -1])
    torch.testing.assert_close(lensed, own, atol=1e-5, rtol=1e-5)
    kl, owner = held_out_kl(lm, translators, corpus(5, 9, lm.tokenizer))
    assert kl.shape[1] == lm.n_layers and np.abs(kl[:, -1]).max() < 1e-5 and (kl[:, :-1] >= -1e-6).all()
    assert len(owner) == len(kl)


def test_the_tuned_lens_lowers_its_loss_and_starts_at_the_identity(lm):
    prompts = corpus(32, 4, lm.tokenizer)
    flags = [p.requires_grad for p in lm.model.parameters()]
    first = fit_tuned(lm, prompts, steps=1, batch_size=32, lr=1e-2)
    logit = held_out_kl(lm, identity(lm.n_layers, 32), prompts)[0][:, :-1].mean()
    assert first.losses[0] == pytest.approx(logit, rel=1e-4)  # step one is the logit lens's own loss
    trained = fit_tuned(lm, prompts, steps=30, batch_size=32, lr=1e-2, seed=5)
    assert trained.losses[-1] < 0.8 * trained.losses[0]
    assert held_out_kl(lm, trained.translators, prompts)[0][:, :-1].mean() < logit
    assert trained.translators.provenance["steps"] == 30 and trained.translators.provenance["seed"] == 5
    assert [p.requires_grad for p in lm.model.parameters()] == flags  # the model's flags are restored


def test_translators_round_trip_with_their_provenance_and_refuse_bad_input(lm, tmp_path):
    fitted = fit_linear(lm, corpus(20, 6, lm.tokenizer), provenance={"corpus": "words"})
    path = fitted.save(tmp_path / "linear.safetensors")
    back = Translators.load(path)
    assert back.kind == "linear" and back.provenance == fitted.provenance
    assert torch.equal(back.weight, fitted.weight) and torch.equal(back.bias, fitted.bias)
    assert not list(tmp_path.glob(".*.tmp"))
    with pytest.raises(ValueError, match=r"lens kind must be one of .*, got 'tuned-ish'"):
        Translators("tuned-ish", fitted.weight, fitted.bias)
    with pytest.raises(ValueError, match="final block's translator must be the identity"):
        Translators("linear", fitted.weight.flip(0), fitted.bias.flip(0))
    with pytest.raises(ValueError, match=r"got \(4, 32, 32\) and \(3, 32\)"):
        Translators("linear", fitted.weight, fitted.bias[1:])
    other = tiny_model("llama", seed=3, n_layers=3)
    with pytest.raises(ValueError, match="translators for 4 blocks of width 32 do not fit 'tiny-llama'"):
        held_out_kl(other, fitted, corpus(2, 0, other.tokenizer))
    (tmp_path / "plain.safetensors").write_bytes(b"")
    with pytest.raises(ValueError, match=r"plain\.safetensors is damaged: 0 bytes are too short .*snakemake --force"):
        Translators.load(tmp_path / "plain.safetensors")
    with pytest.raises(ValueError, match="steps must be a positive integer, got 0"):
        fit_tuned(lm, corpus(2, 0, lm.tokenizer), steps=0)


def test_linear_on_the_real_embedded_model_matches_an_independent_fit(smollm2):
    """SmolLM2-135M (30 blocks of width 576): the closed-form fit's predictions equal numpy's float64
    least squares on the same ~650 tokens, for an early, a middle and the second-to-last block."""
    prompts = corpus(48, 7, smollm2.tokenizer)
    fitted = fit_linear(smollm2, prompts, batch_size=16)
    _, resid = _stacked(smollm2, prompts)
    assert len(resid) > 577  # more tokens than coefficients per output
    for layer in (2, 15, 28):
        x = np.concatenate([resid[:, layer], np.ones((len(resid), 1))], -1)
        reference = x @ np.linalg.lstsq(x, resid[:, -1], rcond=None)[0]
        ours = resid[:, layer] @ fitted.weight[layer].double().numpy() + fitted.bias[layer].double().numpy()
        assert np.linalg.norm(ours - reference) < 1e-4 * np.linalg.norm(reference), layer


def test_held_out_kl_frees_each_blocks_result_before_the_next_block(lm, monkeypatch):
    """Each block's KL is copied into the table and freed before the next block's [n, V] temporaries: a result
    kept per block sat between freed temporaries and grew the heap by about one [n, V] per block (SmolLM2-135M's
    fit: 1.2 GB at 30 blocks, in some runs)."""
    alive: list[weakref.ref] = []

    def kl_tracked(log_p, log_q):
        assert all(ref() is None for ref in alive), "an earlier block's KL result is still alive"
        result = kl_divergence(log_p, log_q)
        alive.append(weakref.ref(result))
        return result

    monkeypatch.setattr(held_out_module, "kl_divergence", kl_tracked)
    prompts = corpus(6, 7, lm.tokenizer)
    kl, _ = held_out_kl(lm, identity(lm.n_layers, 32), prompts, batch_size=3)
    monkeypatch.undo()
    assert len(alive) == 2 * lm.n_layers  # two batches, every block
    np.testing.assert_array_equal(kl, held_out_kl(lm, identity(lm.n_layers, 32), prompts, batch_size=3)[0])
