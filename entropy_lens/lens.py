"""The logit lens: decode per-block residuals and assemble profile datasets.

Each residual is decoded as the model decodes its last one: final norm (applied with
that residual's own statistics), unembedding, then soft-capping where the model has
it.  Rows of ``[rows, vocab]`` logits are decoded in chunks sized by a memory budget,
so peak extra memory does not grow with layers x batch.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import xarray as xr

from entropy_lens import metrics, schema
from entropy_lens.generation import GenerationSettings, generate, row_seed
from entropy_lens.models import LensModel

logger = logging.getLogger(__name__)

DEFAULT_BUDGET_BYTES = 512 * 2**20
DEFAULT_ALPHAS = (0.5, 1.0, 5.0)


@dataclass(frozen=True)
class LensSettings:
    """What is measured at every (token, layer).

    Attributes:
        top_p: Nucleus mass, in ``(0, 1]``.
        alphas: Renyi orders (``>= 0``, ``inf`` allowed).
        budget_bytes: Peak working memory for decoding one chunk of rows.
    """

    top_p: float = 0.6
    alphas: tuple[float, ...] = DEFAULT_ALPHAS
    budget_bytes: int = DEFAULT_BUDGET_BYTES

    def __post_init__(self) -> None:
        metrics.check_top_p(self.top_p)
        object.__setattr__(self, "alphas", metrics.check_alphas(self.alphas))
        if not isinstance(self.budget_bytes, int) or self.budget_bytes <= 0:
            raise ValueError(f"budget_bytes must be a positive integer, got {self.budget_bytes!r}")


@torch.inference_mode()
def lens_logits(lm: LensModel, resid: torch.Tensor) -> torch.Tensor:
    """``[n, V]`` float32 logits of ``[n, d]`` residuals through norm, unembedding, soft-cap."""
    logits = lm.unembed(lm.final_norm(resid)).float()
    if lm.softcap:
        logits = lm.softcap * torch.tanh(logits / lm.softcap)
    return logits


def rows_per_chunk(vocab_size: int, budget_bytes: int) -> int:
    """How many rows of logits fit the budget; raises if not even one does."""
    per_row = vocab_size * metrics.bytes_per_logit()
    if budget_bytes < per_row:
        raise ValueError(
            f"chunk budget of {budget_bytes} bytes is below one row of logits "
            f"({per_row} bytes for vocab {vocab_size}); raise budget_bytes"
        )
    return budget_bytes // per_row


@dataclass
class StepMetrics:
    """Metrics of one step for ``B`` rows and ``L`` layers (numpy, float32/int32)."""

    entropy: np.ndarray  # [B, L]
    renyi: np.ndarray  # [B, L, A]
    nucleus_size: np.ndarray  # [B, L]
    nucleus_jaccard: np.ndarray  # [B, L]
    top1_id: np.ndarray  # [B, L]


@torch.inference_mode()
def decode_residuals(lm: LensModel, resid: torch.Tensor, settings: LensSettings) -> StepMetrics:
    """Lens metrics for residuals ``[B, L, d]`` of one step, decoded in row chunks.

    Rows are flattened as ``(b, l)`` so adjacent layers are adjacent rows; the last
    nucleus mask of a chunk is carried into the next for the Jaccard overlap.
    """
    batch, n_layers, _ = resid.shape
    flat = resid.reshape(batch * n_layers, -1)
    step = rows_per_chunk(lm.vocab_size, settings.budget_bytes)
    parts: list[metrics.RowMetrics] = []
    overlaps: list[torch.Tensor] = []
    carry: torch.Tensor | None = None
    for start in range(0, flat.shape[0], step):
        rm = metrics.row_metrics(
            lens_logits(lm, flat[start : start + step]), top_p=settings.top_p, alphas=settings.alphas
        )
        masks = rm.nucleus_mask if carry is None else torch.cat([carry, rm.nucleus_mask])
        overlaps.append(metrics.jaccard(masks[:-1], masks[1:]))
        carry = rm.nucleus_mask[-1:]
        parts.append(_drop_mask(rm))
    jac = torch.cat([*overlaps, torch.full((1,), math.nan, device=flat.device)])
    jac = jac.reshape(batch, n_layers)
    jac[:, -1] = math.nan  # the last block has no next layer
    return _to_numpy(parts, jac, batch, n_layers)


def _drop_mask(rm: metrics.RowMetrics) -> metrics.RowMetrics:
    return metrics.RowMetrics(rm.entropy, rm.renyi, rm.nucleus_size, rm.top1_id, rm.nucleus_mask[:0])


def _to_numpy(parts: list[metrics.RowMetrics], jac: torch.Tensor, batch: int, n_layers: int) -> StepMetrics:
    def cat(attr: str, dtype) -> np.ndarray:
        values = torch.cat([getattr(p, attr) for p in parts]).cpu().numpy().astype(dtype)
        return values.reshape(batch, n_layers, *values.shape[1:])

    return StepMetrics(
        entropy=cat("entropy", np.float32),
        renyi=cat("renyi", np.float32),
        nucleus_size=cat("nucleus_size", np.int32),
        nucleus_jaccard=jac.cpu().numpy().astype(np.float32),
        top1_id=cat("top1_id", np.int32),
    )


@dataclass
class _Buffers:
    """Output arrays ``[N, T, L(, A)]`` filled step by step; masked slots keep fills."""

    n_prompts: int
    n_tokens: int
    n_layers: int
    n_alphas: int
    arrays: dict[str, np.ndarray] = field(init=False)

    def __post_init__(self) -> None:
        shape = (self.n_prompts, self.n_tokens, self.n_layers)
        self.arrays = {
            schema.ENTROPY: np.full(shape, np.nan, np.float32),
            schema.RENYI: np.full((*shape, self.n_alphas), np.nan, np.float32),
            schema.NUCLEUS_SIZE: np.full(shape, schema.MASKED_INT, np.int32),
            schema.NUCLEUS_JACCARD: np.full(shape, np.nan, np.float32),
            schema.TOP1_ID: np.full(shape, schema.MASKED_INT, np.int32),
            schema.TOKEN_ID: np.full(shape[:2], schema.MASKED_INT, np.int32),
        }

    def put(self, rows: np.ndarray, step: int, sm: StepMetrics) -> None:
        for name in (schema.ENTROPY, schema.RENYI, schema.NUCLEUS_SIZE, schema.NUCLEUS_JACCARD, schema.TOP1_ID):
            self.arrays[name][rows, step] = getattr(sm, name)


def blank_prompt_ids(tokenizer) -> list[int]:
    """Token ids of the empty prompt: the beginning-of-sequence token alone.

    Models without a BOS token (Qwen, GPT-2 style) start documents after their
    end-of-text token, which is then used instead.  Never a doubled BOS.
    """
    for token_id in (tokenizer.bos_token_id, tokenizer.eos_token_id):
        if token_id is not None:
            return [int(token_id)]
    raise ValueError("tokenizer has neither a BOS nor an EOS token: the empty prompt has no encoding")


def encode_prompts(lm: LensModel, prompts: Sequence[str], *, chat_template: bool) -> tuple[list[list[int]], list[str]]:
    """Token ids and rendered text of each prompt (the chat template applied if asked)."""
    tok = lm.tokenizer
    if chat_template and not getattr(tok, "chat_template", None):
        raise ValueError(f"model {lm.name!r} has no chat template; set chat_template=False")
    rendered = [
        tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
        if chat_template
        else p
        for p in prompts
    ]
    ids = [
        blank_prompt_ids(tok) if text == "" else tok(text, add_special_tokens=not chat_template)["input_ids"]
        for text in rendered
    ]
    empty = [i for i, row in enumerate(ids) if not row]
    if empty:
        raise ValueError(f"prompt {empty[0]} ({prompts[empty[0]]!r}) encodes to no tokens for {lm.name!r}")
    return ids, rendered


def extract_profiles(
    lm: LensModel,
    prompts: Sequence[str],
    *,
    max_new_tokens: int,
    top_p: float = 0.6,
    alphas: Sequence[float] = DEFAULT_ALPHAS,
    batch_size: int = 8,
    do_sample: bool = False,
    temperature: float = 1.0,
    seed: int = 0,
    chat_template: bool = False,
    prompt_ids: Sequence[str] | None = None,
    budget_bytes: int = DEFAULT_BUDGET_BYTES,
    sample_seeds: Sequence[int] | None = None,
    progress: Callable[[int], None] | None = None,
) -> xr.Dataset:
    """Generate from each prompt and record the entropy profile of every new token.

    Args:
        lm: Model from :func:`entropy_lens.load_model`.
        prompts: ``N`` prompt texts (before any chat template).
        max_new_tokens: Token slots ``T`` per prompt.
        top_p: Nucleus mass in ``(0, 1]``.
        alphas: Renyi orders.
        batch_size: Prompts per forward pass (prompts are length-sorted into batches).
        do_sample, temperature, seed: Token choice (greedy by default).
        chat_template: Render each prompt as a user turn with the model's template.
        prompt_ids: Stable ids (default ``p0000``...).
        budget_bytes: Working memory for decoding a chunk of lens rows.
        sample_seeds: Per-prompt sampling seeds (default derived from ``seed`` and the
            prompt's position), so a prompt samples the same whatever its batch.
        progress: Called with the number of prompts finished after each batch.

    Returns:
        A dataset following :mod:`entropy_lens.schema` with dims
        ``(prompt, token, layer, alpha)``.
    """
    settings = GenerationSettings(max_new_tokens, do_sample, temperature, seed)
    lens = LensSettings(top_p, tuple(alphas), budget_bytes)
    ids = _check_prompts(prompts, prompt_ids, batch_size)
    encoded, rendered = encode_prompts(lm, prompts, chat_template=chat_template)
    buf = _Buffers(len(prompts), max_new_tokens, lm.n_layers, len(lens.alphas))
    seeds = list(sample_seeds) if sample_seeds is not None else [row_seed(seed, i) for i in range(len(prompts))]
    if len(seeds) != len(prompts):
        raise ValueError(f"sample_seeds must hold {len(prompts)} seeds, got {len(seeds)}")
    order = np.argsort([len(e) for e in encoded], kind="stable")
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        _run_batch(lm, [encoded[r] for r in rows], rows, [seeds[r] for r in rows], settings, lens, buf)
        if progress is not None:
            progress(len(rows))
    attrs = _attrs(lm, lens, settings, chat_template)
    return build_dataset(buf.arrays, ids, rendered, lm.n_layers, lens.alphas, attrs)


def _check_prompts(prompts: Sequence[str], prompt_ids: Sequence[str] | None, batch_size: int) -> list[str]:
    if isinstance(prompts, str) or not len(prompts):
        raise ValueError(f"prompts must be a non-empty list of strings, got {prompts!r}")
    if not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    ids = list(prompt_ids) if prompt_ids is not None else [f"p{i:04d}" for i in range(len(prompts))]
    if len(ids) != len(prompts) or len(set(ids)) != len(ids):
        raise ValueError(f"prompt_ids must be {len(prompts)} distinct ids, got {len(ids)} ({len(set(ids))} distinct)")
    return [str(i) for i in ids]


def _run_batch(lm, batch, rows, seeds, settings, lens, buf) -> None:
    def on_step(step: int, resid: torch.Tensor, _logits: torch.Tensor, alive: torch.Tensor) -> None:
        live = alive.cpu().numpy()
        if live.any():
            sm = decode_residuals(lm, resid[alive], lens)
            buf.put(rows[live], step, sm)

    tokens = generate(lm, batch, settings, on_step, row_seeds=seeds)
    buf.arrays[schema.TOKEN_ID][rows] = tokens.cpu().numpy().astype(np.int32)


def _attrs(lm: LensModel, lens: LensSettings, settings: GenerationSettings, chat_template: bool) -> dict:
    return schema.provenance(
        model_name=lm.name,
        model_source=lm.source,
        model_sha256=lm.sha256,
        model_family=lm.family,
        n_layers=lm.n_layers,
        n_params=lm.n_params,
        vocab_size=lm.vocab_size,
        dtype=str(lm.dtype).removeprefix("torch."),
        device=str(lm.device),
        top_p=lens.top_p,
        alphas=list(lens.alphas),
        max_new_tokens=settings.max_new_tokens,
        do_sample=settings.do_sample,
        temperature=settings.temperature,
        seed=settings.seed,
        chat_template=chat_template,
        softcap=lm.softcap,
    )


def build_dataset(
    arrays: dict[str, np.ndarray],
    prompt_ids: Sequence[str],
    rendered: Sequence[str],
    n_layers: int,
    alphas: Sequence[float],
    attrs: dict,
) -> xr.Dataset:
    """Wrap metric arrays into a schema-conformant dataset (validated before return)."""
    layers = np.arange(n_layers, dtype=np.int32)
    coords = {
        schema.PROMPT: np.asarray(prompt_ids, dtype=object),
        schema.PROMPT_TEXT: (schema.PROMPT, np.asarray(rendered, dtype=object)),
        schema.TOKEN: np.arange(arrays[schema.TOKEN_ID].shape[1], dtype=np.int32),
        schema.LAYER: layers,
        schema.DEPTH: (schema.LAYER, schema.depth_of(layers, n_layers)),
        schema.ALPHA: np.asarray(alphas, dtype=np.float64),
    }
    data_vars = {
        name: (spec.dims, arrays[name], {"units": spec.units, "long_name": spec.description})
        for name, spec in schema.VARIABLES.items()
    }
    ds = xr.Dataset(data_vars, coords=coords, attrs=attrs)
    schema.validate_profiles(ds)
    return ds
