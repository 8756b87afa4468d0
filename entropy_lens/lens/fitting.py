"""Fitting a lens to the model: the corpus's residuals, the linear lens in closed form, the tuned lens trained by
KL, and one entry point per :data:`~entropy_lens.lens.translators.LENS_KINDS` kind.

* ``linear``: per block, the least-squares affine map from the block's residual to the final block's
  (Din et al., 2023): float64 normal equations summed over every token of a corpus, one solve per block; solved
  at nested prefixes of the corpus, the learning curve (:func:`fit_linear_curve`);
* ``tuned``: per block, an affine translator initialised at the identity and trained to minimise the KL
  divergence from the model's own final distribution to the lens's (Belrose et al., 2023).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from entropy_lens.lens.decoding import head_logits
from entropy_lens.lens.encoding import check_context, encode_prompts
from entropy_lens.lens.translators import LENS_KINDS, Translators, identity
from entropy_lens.model.batching import batches, padded
from entropy_lens.model.hooks import record_block_outputs
from entropy_lens.model.lens_model import LensModel
from entropy_lens.prompts.counts import curve_sizes

# The corpus ------------------------------------------------------------------------------------------------------


@torch.inference_mode()
def corpus_residuals(
    lm: LensModel, prompt_ids: Sequence[Sequence[int]], batch_size: int = 8, last: int | None = None
) -> Iterator[tuple]:
    """Every block's residual at every real (unpadded) position of each prompt, one batch at a time; with
    ``last``, at the last ``last`` positions of each prompt only (the model still reads the whole prompt).

    Yields:
        ``(rows, resid)``: the prompt index of each token ``[n]`` and the residuals ``[n, L, d]``.
    """
    if last is not None and (not isinstance(last, int) or last < 1):
        raise ValueError(f"last must be a positive integer or None, got {last!r}")
    pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else 0
    for rows in batches([len(ids) for ids in prompt_ids], batch_size):
        inputs = padded([prompt_ids[i] for i in rows], pad, lm.device)
        inputs = {key: value.to(lm.device) for key, value in inputs.items()}
        with record_block_outputs(lm) as slots:
            lm.model(**inputs, use_cache=False, logits_to_keep=1)  # the residuals, not [B, S, V] logits
        real = inputs["attention_mask"].bool()
        if last is not None:  # left padded: every prompt ends in the last column
            real[:, : max(real.shape[1] - last, 0)] = False
        resid = torch.stack([slot[real] for slot in slots], dim=1)  # [n, L, d]
        owner = torch.as_tensor(rows, device=real.device)[:, None].expand_as(real)[real]
        yield owner.cpu().numpy(), resid


def corpus_ids(lm: LensModel, prompts: Sequence[str], names: Sequence[str] | None = None) -> list[list[int]]:
    """Token ids of each corpus prompt, encoded as the profiles encode raw prompts (no chat template).

    Raises:
        ValueError: naming a prompt longer than the model's context (``names``, default its index).
    """
    ids, _ = encode_prompts(lm, list(prompts), chat_template=False)
    check_context(lm, ids, 0, list(names) if names is not None else [str(i) for i in range(len(ids))])
    return ids


def _tokens(prompt_ids: Sequence[Sequence[int]]) -> int:
    return int(sum(len(ids) for ids in prompt_ids))


# The linear lens ------------------------------------------------------------------------------------------------


class NormalEquations:
    """The linear lens's normal equations ``[h, 1]^T [h, 1] W = [h, 1]^T h_final`` per block, summed in float64
    token by token (:meth:`add`) and solvable at any point (:meth:`solve`): so a corpus's nested prefixes are
    solved as it is read (the learning curve), and memory does not grow with the corpus.

    On the model's device: at paper scale the sums are ~4 (d + 1)^2 (L - 1) float64 FLOPs per token.
    """

    def __init__(self, n_layers: int, hidden_size: int, device: torch.device | str = "cpu") -> None:
        self.n_layers, self.hidden_size = n_layers, hidden_size
        size = hidden_size + 1
        self.gram = torch.zeros(n_layers - 1, size, size, dtype=torch.float64, device=device)
        self.cross = torch.zeros(n_layers - 1, size, hidden_size, dtype=torch.float64, device=device)
        self.tokens = 0

    def add(self, resid: torch.Tensor) -> None:
        """Add ``[n, L, d]`` residuals (every block's, the last one the target)."""
        ones = torch.ones(resid.shape[0], 1, dtype=torch.float64, device=resid.device)
        y = resid[:, -1].double()
        for block in range(self.n_layers - 1):  # one block's float64 copy at a time: [n, d + 1], not [n, L, d + 1]
            x = torch.cat([resid[:, block].double(), ones], -1)
            self.gram[block] += x.T @ x
            self.cross[block] += x.T @ y
        self.tokens += int(resid.shape[0])

    def solve(self, provenance: Mapping | None = None) -> Translators:
        """The linear lens of the tokens added so far (the final block's translator the identity)."""
        if not self.tokens:
            raise ValueError("no token added to the normal equations; add a corpus before solving")
        d = self.hidden_size
        solved = solve_normal_equations(self.gram.cpu(), self.cross.cpu())
        weight = torch.cat([solved[:, :d].float(), torch.eye(d)[None]], 0)
        bias = torch.cat([solved[:, d].float(), torch.zeros(1, d)], 0)
        return Translators("linear", weight, bias, dict(provenance or {}))


def fit_linear(
    lm: LensModel, prompt_ids: Sequence[Sequence[int]], *, batch_size: int = 8, provenance: Mapping | None = None
) -> Translators:
    """Per block, the least-squares affine map from the block's residual to the final block's, in closed form.

    The normal equations (:class:`NormalEquations`) are summed in float64 over every token of the corpus and
    solved once per block (the minimum-norm solution where the corpus is too small to fix every coefficient).

    Args:
        lm: The model.
        prompt_ids: The corpus, as token ids (disjoint from every analysed prompt set).
        batch_size: Prompts per forward pass.
        provenance: Recorded with the fit (corpus, seed, ...); tokens, prompts, dtype and model are added.
    """
    ((_, translators),) = fit_linear_curve(
        lm, prompt_ids, [len(prompt_ids)], batch_size=batch_size, provenance=provenance
    )
    return translators


def fit_linear_curve(
    lm: LensModel,
    prompt_ids: Sequence[Sequence[int]],
    sizes: Sequence[int],
    *,
    batch_size: int = 8,
    provenance: Mapping | None = None,
) -> Iterator[tuple[int, Translators]]:
    """The linear lens of each nested prefix of the corpus: its first ``sizes[0]`` prompts, then its first
    ``sizes[1]``, ...; one pass over the corpus, the normal equations solved at each size (the learning curve).

    Args:
        lm: The model.
        prompt_ids: The corpus, as token ids, in the order its prefixes take them.
        sizes: Prompts of each prefix, increasing, each at most the corpus's.
        batch_size: Prompts per forward pass.
        provenance: Recorded with each fit; its tokens, prompts, dtype and model are added.

    Yields:
        ``(tokens, translators)`` of each prefix, in order.

    Raises:
        ValueError: for sizes that are not increasing positive counts within the corpus.
    """
    sizes = [int(s) for s in sizes]
    if not sizes or sizes[0] < 1 or any(b <= a for a, b in itertools.pairwise(sizes)) or sizes[-1] > len(prompt_ids):
        raise ValueError(
            f"curve sizes must be increasing prompt counts from 1 to the corpus's {len(prompt_ids)}, got {sizes}"
        )
    equations = NormalEquations(lm.n_layers, int(lm.unembed.weight.shape[1]), lm.device)
    start = 0
    for size in sizes:
        for _, resid in corpus_residuals(lm, prompt_ids[start:size], batch_size):
            equations.add(resid)
        start = size
        yield equations.tokens, equations.solve(_provenance(lm, prompt_ids[:size], provenance))


def solve_normal_equations(gram: torch.Tensor, cross: torch.Tensor) -> torch.Tensor:
    """The minimum-norm ``W`` of ``gram @ W = cross`` per leading index (float64, batched).

    A positive-definite ``gram`` (more independent tokens than coefficients) is solved by Cholesky; any other
    through its eigendecomposition, eigenvalues below ``eps * size * largest`` dropped as LAPACK's
    least-squares drivers cut singular values (the minimum-norm solution of an under-determined fit).
    """
    factor, info = torch.linalg.cholesky_ex(gram)
    solved = torch.cholesky_solve(cross, factor)
    singular = torch.nonzero(info).flatten()
    if singular.numel():
        values, vectors = torch.linalg.eigh(gram[singular])
        cutoff = values.amax(-1, keepdim=True).clamp_min(0) * gram.shape[-1] * torch.finfo(gram.dtype).eps
        inverse = torch.where(values > cutoff, 1.0 / values, torch.zeros_like(values))
        solved[singular] = vectors @ (inverse[..., None] * (vectors.transpose(-1, -2) @ cross[singular]))
    return solved


def _provenance(lm: LensModel, prompt_ids: Sequence[Sequence[int]], extra: Mapping | None) -> dict:
    return {
        **dict(extra or {}),
        "model": lm.name,
        "model_sha256": lm.sha256,
        "dtype": str(lm.dtype).removeprefix("torch."),
        "prompts": len(prompt_ids),
        "tokens": _tokens(prompt_ids),
    }


# The tuned lens -------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def frozen(lm: LensModel) -> Iterator[None]:
    """The model's parameters take no gradient inside the context; their flags are restored on exit."""
    params = list(lm.model.parameters())
    flags = [p.requires_grad for p in params]
    try:
        for p in params:
            p.requires_grad_(False)
        yield
    finally:
        for p, flag in zip(params, flags, strict=True):
            p.requires_grad_(flag)


@dataclass(frozen=True)
class TunedFit:
    """A trained tuned lens and the loss (mean KL over tokens and blocks, nats) of each step."""

    translators: Translators
    losses: tuple[float, ...]


def fit_tuned(
    lm: LensModel,
    prompt_ids: Sequence[Sequence[int]],
    *,
    steps: int,
    lr: float = 1e-3,
    seed: int = 0,
    batch_size: int = 8,
    init: Translators | None = None,
    provenance: Mapping | None = None,
) -> TunedFit:
    """Per block, an affine translator trained to minimise KL(model's final distribution || lens distribution).

    Each step draws ``batch_size`` prompts of the corpus (seeded), runs the frozen model once, and takes one
    Adam step on the translators of every block but the last (the identity, held fixed). The blocks'
    losses are backpropagated one block at a time, so one block's ``[tokens, V]`` logits are alive at once.

    Args:
        lm: The model (its parameters are frozen while training and restored after).
        prompt_ids: The corpus, as token ids.
        steps: Optimiser steps (a few on a CPU; thousands on GPUs at paper scale).
        lr: Adam's learning rate.
        seed: Seed of the prompt draws.
        batch_size: Prompts per step.
        init: Start here instead of the identity (e.g. from the linear lens).
        provenance: Recorded with the fit; steps, lr, seed, tokens, dtype and model are added.
    """
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    n_layers, d = lm.n_layers, int(lm.unembed.weight.shape[1])
    start = init or identity(n_layers, d)
    start.check_model(lm)
    weight = start.weight[:-1].clone().to(lm.device).requires_grad_(True)
    bias = start.bias[:-1].clone().to(lm.device).requires_grad_(True)
    optimiser = torch.optim.Adam([weight, bias], lr=lr)
    rng = np.random.default_rng(seed)
    losses = []
    with frozen(lm):
        for _ in range(steps):
            chosen = rng.choice(len(prompt_ids), size=min(batch_size, len(prompt_ids)), replace=False)
            optimiser.zero_grad()
            losses.append(_tuned_step(lm, [prompt_ids[i] for i in chosen], weight, bias))
            optimiser.step()
    eye, zero = torch.eye(d)[None], torch.zeros(1, d)
    translators = Translators(
        "tuned",
        torch.cat([weight.detach().float().cpu(), eye]),
        torch.cat([bias.detach().float().cpu(), zero]),
        {**_provenance(lm, prompt_ids, provenance), "steps": steps, "lr": lr, "seed": seed},
    )
    return TunedFit(translators, tuple(losses))


def _tuned_step(lm: LensModel, prompt_ids: Sequence[Sequence[int]], weight: torch.Tensor, bias: torch.Tensor) -> float:
    """Backpropagate the mean KL of every block of one batch; returns it."""
    ((_, resid),) = corpus_residuals(lm, prompt_ids, batch_size=len(prompt_ids))
    resid = resid.clone()  # out of inference mode
    with torch.no_grad():
        target = torch.log_softmax(head_logits(lm, resid[:, -1]), -1)
    total = 0.0
    blocks = lm.n_layers - 1
    for layer in range(blocks):
        mapped = (resid[:, layer].float() @ weight[layer] + bias[layer]).to(resid.dtype)
        loss = kl_divergence(target, torch.log_softmax(head_logits(lm, mapped), -1)).mean() / blocks
        loss.backward()
        total += float(loss.detach())
    return total


def fit_curve(
    lm: LensModel,
    kind: str,
    prompt_ids: Sequence[Sequence[int]],
    *,
    points: int = 1,
    batch_size: int = 8,
    steps: int = 1,
    lr: float = 1e-3,
    seed: int = 0,
    provenance: Mapping | None = None,
) -> Iterator[tuple[int, int, Translators]]:
    """Translators of one kind at each size of its learning curve: the linear lens at the ``points`` nested
    prefixes of :func:`curve_sizes` (:func:`fit_linear_curve`, one pass over the corpus); any other kind once, on
    the whole corpus (:func:`fit_kind`).

    Yields:
        ``(prompts, tokens, translators)`` of each size, increasing; the last is fitted on the whole corpus.
    """
    if kind == "linear":
        sizes = curve_sizes(len(prompt_ids), points)
        fits = fit_linear_curve(lm, prompt_ids, sizes, batch_size=batch_size, provenance=provenance)
        for size, (tokens, translators) in zip(sizes, fits, strict=True):
            yield size, tokens, translators
        return
    common = {"batch_size": batch_size, "steps": steps, "lr": lr, "seed": seed, "provenance": provenance}
    yield len(prompt_ids), _tokens(prompt_ids), fit_kind(lm, kind, prompt_ids, **common)


def kl_divergence(log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """``KL(p || q)`` per row of log-probabilities ``[n, V]``, nats."""
    return (log_p.exp() * (log_p - log_q)).sum(-1)


def fit_kind(
    lm: LensModel,
    kind: str,
    prompt_ids: Sequence[Sequence[int]],
    *,
    batch_size: int = 8,
    steps: int = 1,
    lr: float = 1e-3,
    seed: int = 0,
    provenance: Mapping | None = None,
) -> Translators:
    """Translators of one :data:`LENS_KINDS` kind fitted on ``prompt_ids`` (``logit``: the identity;
    ``tuned``: ``steps`` Adam steps of :func:`fit_tuned` from the identity)."""
    if kind == "logit":
        lens = identity(lm.n_layers, int(lm.unembed.weight.shape[1]))
        return Translators("logit", lens.weight, lens.bias, _provenance(lm, prompt_ids, provenance))
    if kind == "linear":
        return fit_linear(lm, prompt_ids, batch_size=batch_size, provenance=provenance)
    if kind == "tuned":
        fit = fit_tuned(lm, prompt_ids, steps=steps, lr=lr, seed=seed, batch_size=batch_size, provenance=provenance)
        return fit.translators
    raise ValueError(f"lens kind must be one of {LENS_KINDS}, got {kind!r}")
