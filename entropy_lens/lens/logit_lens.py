"""The logit lens: decode per-block residuals and assemble profile datasets.

Each residual is decoded as the model decodes its last one: final norm (applied with
that residual's own statistics), unembedding in the weight dtype, then soft-capping
where the model has it.  The vocabulary is decoded in tiles: every (batch x layer) row
of a step against one tile of the unembedding is one efficient matrix product, and
:class:`~entropy_lens.lens.stream.TileStream` folds each tile into running sums, so the
``[rows, vocab]`` logits never exist at once and the unembedding is read once per step.
Tile width (and, for very many rows, row chunks) follow a memory budget.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import xarray as xr

from entropy_lens.lens.entropy import check_alphas
from entropy_lens.lens.metrics import bytes_per_logit
from entropy_lens.lens.nucleus import (
    NucleusSets,
    adjacent_jaccard,
    cat_sets,
    check_top_p,
    membership_bits,
    nucleus_given_norm,
    set_bits,
)
from entropy_lens.lens.stream import StreamResult, TileStream, log_norm_of
from entropy_lens.model.batching import batches
from entropy_lens.model.generation import GenerationSettings, generate, row_seed
from entropy_lens.model.loading import LensModel
from entropy_lens.model.routing import Router, find_routers, max_top_k, record_routing, routing_metrics
from entropy_lens.store import schema

logger = logging.getLogger(__name__)

DEFAULT_BUDGET_BYTES = 512 * 2**20
DEFAULT_ALPHAS = (0.5, 1.0, 5.0)
# Logits per tile: few enough products per step that thread barriers stay rare, and wide enough
# tiles that the product of every row with one runs near the machine's GEMM rate.
TILE_LOGITS = 2**22
# Narrowest tile worth a product of its own: below this the rows are chunked instead.
MIN_TILE = 2048
# Working bytes per logit of a tile (float32 logits, a weight-dtype product, candidate mask), per
# kept top-p candidate (row, id, logit, ranking temporaries); a row's membership bitset takes V/8.
TILE_BYTES_PER_LOGIT = 12
BYTES_PER_CANDIDATE = 32
MIN_CANDIDATE_CAP = 4096


@dataclass(frozen=True)
class LensSettings:
    """What is measured at every (token, layer).

    Attributes:
        top_p: Nucleus mass, in ``(0, 1]``.
        alphas: Renyi orders (``>= 0``, ``inf`` allowed).
        budget_bytes: Peak working memory for decoding one step's residuals.
    """

    top_p: float = 0.6
    alphas: tuple[float, ...] = DEFAULT_ALPHAS
    budget_bytes: int = DEFAULT_BUDGET_BYTES

    def __post_init__(self) -> None:
        check_top_p(self.top_p)
        object.__setattr__(self, "alphas", check_alphas(self.alphas))
        if not isinstance(self.budget_bytes, int) or self.budget_bytes <= 0:
            raise ValueError(f"budget_bytes must be a positive integer, got {self.budget_bytes!r}")

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> LensSettings:
        """The settings of the workflow config's ``lens`` section (``top_p``, ``alphas``, ``budget_mb``)."""
        return cls(section["top_p"], tuple(section["alphas"]), section["budget_mb"] * 2**20)


@dataclass(frozen=True)
class Readout:
    """Choices whose log-probabilities extraction reads at the first generated position.

    Attributes:
        labels: Names of the ``C`` choices (the store's ``choice`` coordinate), e.g. ``A``..``D``.
        token_ids: ``[N, C]`` int64 token of each choice after each prompt; a row of ``-1``
            marks a prompt whose choices that position cannot read (left NaN).
    """

    labels: tuple[str, ...]
    token_ids: np.ndarray

    def __post_init__(self) -> None:
        ids = np.asarray(self.token_ids)
        if ids.ndim != 2 or ids.shape[1] != len(self.labels) or not self.labels:
            raise ValueError(f"token_ids must be [N, {len(self.labels)}] for labels {self.labels}, got {ids.shape}")

    @property
    def readable(self) -> np.ndarray:
        """``[N]`` bool: the prompts whose choices the first generated position reads."""
        return (np.asarray(self.token_ids) >= 0).all(axis=1)


@torch.inference_mode()
def lens_logits(lm: LensModel, resid: torch.Tensor) -> torch.Tensor:
    """``[n, V]`` float32 logits of ``[n, d]`` residuals through norm, unembedding, soft-cap."""
    logits = lm.unembed(lm.final_norm(resid)).float()
    if lm.softcap:
        logits = lm.softcap * torch.tanh(logits / lm.softcap)
    return logits


def project_tile(lm: LensModel, normed_t: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """``[stop - start, n]`` float32 logits of tokens ``start .. stop`` (vocabulary-major).

    Args:
        lm: The model; its unembedding's ``weight`` (``[V, d]``) and optional ``bias``.
        normed_t: ``[d, n]`` final-normed residuals, transposed, in the weight dtype.
        start, stop: Token range of the tile.

    Returns:
        The tile as :func:`lens_logits` computes it: product in the weight dtype, then
        float32 and soft-capping.
    """
    weight = lm.unembed.weight[start:stop]  # [T, d]
    bias = getattr(lm.unembed, "bias", None)
    tile = torch.mm(weight, normed_t) if bias is None else torch.addmm(bias[start:stop, None], weight, normed_t)
    tile = tile.float()
    if lm.softcap:
        tile = tile.div_(lm.softcap).tanh_().mul_(lm.softcap)
    return tile


def rows_per_chunk(vocab_size: int, budget_bytes: int) -> int:
    """How many full rows of logits fit the budget; raises if not even one does.

    Full rows are decoded only for the rare rows whose top-p set the streamed candidates
    cannot settle (exact histogram search of :mod:`entropy_lens.lens.nucleus`).
    """
    per_row = vocab_size * bytes_per_logit()
    if budget_bytes < per_row:
        raise ValueError(
            f"chunk budget of {budget_bytes} bytes is below one row of logits "
            f"({per_row} bytes for vocab {vocab_size}); raise budget_bytes"
        )
    return budget_bytes // per_row


@dataclass(frozen=True)
class TilePlan:
    """How one step's rows are decoded: ``rows`` at a time, ``width`` tokens per tile.

    Attributes:
        rows: Rows per chunk (all of them unless the budget says otherwise).
        width: Tokens per vocabulary tile.
        cap: Most top-p candidates kept per row.
    """

    rows: int
    width: int
    cap: int

    def bytes(self, vocab_size: int) -> int:
        """Peak working bytes of one chunk under this plan."""
        per_row = vocab_size // 8 + self.cap * BYTES_PER_CANDIDATE + self.width * TILE_BYTES_PER_LOGIT
        return self.rows * per_row


def plan_tiles(n_rows: int, vocab_size: int, budget_bytes: int) -> TilePlan:
    """Rows per chunk and tile width for ``n_rows`` rows within ``budget_bytes``.

    Rows are chunked only when even ``MIN_TILE``-wide tiles of all of them would not fit;
    chunks are then of even size.  Tiles are about ``TILE_LOGITS / rows`` wide and of even
    width, narrower if the budget asks.
    """
    rows_per_chunk(vocab_size, budget_bytes)  # the full-row fallback must fit
    cap = min(vocab_size, max(MIN_CANDIDATE_CAP, vocab_size // 8))
    fixed = vocab_size // 8 + cap * BYTES_PER_CANDIDATE
    narrowest = min(vocab_size, MIN_TILE)
    rows = max(1, min(n_rows, budget_bytes // (fixed + narrowest * TILE_BYTES_PER_LOGIT)))
    rows = -(-n_rows // -(-n_rows // rows))  # even chunks
    fit = (budget_bytes // rows - fixed) // TILE_BYTES_PER_LOGIT
    width = min(vocab_size, fit, max(narrowest, TILE_LOGITS // rows))
    width = -(-vocab_size // -(-vocab_size // width))  # even tiles
    if width < vocab_size:  # whole cache lines, as long as the budget allows
        width = min(width + -width % 64, max(64, fit - fit % 64))
    return TilePlan(rows, width, cap)


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
    """Lens metrics for residuals ``[B, L, d]`` of one step, decoded in vocabulary tiles.

    Rows are flattened as ``(b, l)`` so adjacent layers are adjacent rows; when rows are
    chunked, the last top-p set of a chunk is carried into the next for the Jaccard overlap.
    """
    batch, n_layers, _ = resid.shape
    flat = resid.reshape(batch * n_layers, -1)
    plan = plan_tiles(flat.shape[0], lm.vocab_size, settings.budget_bytes)
    parts: list[StreamResult] = []
    overlaps: list[torch.Tensor] = []
    carry: NucleusSets | None = None
    for start in range(0, flat.shape[0], plan.rows):
        result, sets = _decode_chunk(lm, flat[start : start + plan.rows], settings, plan)
        joined = sets if carry is None else cat_sets([carry, sets])
        overlaps.append(adjacent_jaccard(joined))
        carry = sets.last()
        parts.append(result)
    jac = torch.cat([*overlaps, torch.full((1,), math.nan, device=flat.device)])
    jac = jac.reshape(batch, n_layers)
    jac[:, -1] = math.nan  # the last block has no next layer
    return _to_numpy(parts, jac, batch, n_layers)


def _decode_chunk(lm: LensModel, resid: torch.Tensor, settings: LensSettings, plan: TilePlan):
    """Metrics and top-p sets of one chunk of ``[n, d]`` residuals."""
    normed_t = lm.final_norm(resid).T  # [d, n]
    stream = TileStream(
        resid.shape[0], lm.vocab_size, top_p=settings.top_p, alphas=settings.alphas, cap=plan.cap, device=resid.device
    )
    for start in range(0, lm.vocab_size, plan.width):
        stream.add(project_tile(lm, normed_t, start, min(start + plan.width, lm.vocab_size)), start)
    return _settle_open_rows(lm, resid, stream.finish(), settings, plan)


def _settle_open_rows(lm, resid, result: StreamResult, settings: LensSettings, plan: TilePlan):
    """Decode in full the rows whose top-p set the streamed candidates left open (rare).

    Returns:
        The completed result, and the chunk's sets as :class:`~entropy_lens.lens.nucleus.NucleusSets`.
    """
    size, top1 = result.nucleus_size.clone(), result.top1_id.clone()
    bits = membership_bits(len(size), lm.vocab_size, resid.device)
    set_bits(bits, result.member_rows, result.member_ids)
    rows, ids = [result.member_rows], [result.member_ids]
    todo = torch.nonzero(size == 0).squeeze(-1)
    if todo.numel():
        logger.debug("decoding %d of %d rows in full: top-p set wider than the candidates", len(todo), len(size))
    for part in todo.split(rows_per_chunk(lm.vocab_size, settings.budget_bytes)):
        logits = lens_logits(lm, resid[part])  # [f, V]
        top = logits.max(-1).values  # [f]; this product's own rounding, not the stream's
        norm = (top, log_norm_of(logits, top))
        size[part], mask = nucleus_given_norm(logits, *norm, settings.top_p)
        top1[part] = logits.argmax(-1)
        local, token = torch.nonzero(mask, as_tuple=True)
        set_bits(bits, part[local], token)
        listed = size[part][local] <= plan.cap  # wide sets stay bitsets only
        rows.append(part[local][listed])
        ids.append(token[listed])
    sets = NucleusSets(size, bits, torch.cat(rows), torch.cat(ids))
    done = dataclasses.replace(result, nucleus_size=size, top1_id=top1, member_rows=sets.rows, member_ids=sets.ids)
    return done, sets


def _to_numpy(parts: list[StreamResult], jac: torch.Tensor, batch: int, n_layers: int) -> StepMetrics:
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
class ProfileBuffers:
    """Output arrays ``[N, T, L(, A)]`` filled step by step; masked slots keep fills."""

    n_prompts: int
    n_tokens: int
    n_layers: int
    n_alphas: int
    top_k: int = 0  # routing slots per (token, layer); 0: a dense model records no routing
    n_choices: int = 0  # choices read at the first step (Readout); 0: none
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
        if self.n_choices:
            self.arrays[schema.CHOICE_LOGPROB] = np.full((self.n_prompts, self.n_choices), np.nan, np.float32)
        if self.top_k:
            self.arrays[schema.ROUTING_ENTROPY] = np.full(shape, np.nan, np.float32)
            self.arrays[schema.ROUTING_EXPERTS] = np.full((*shape, self.top_k), schema.MASKED_INT, np.int32)

    def put(self, rows: np.ndarray, step: int, sm: StepMetrics) -> None:
        for name in (schema.ENTROPY, schema.RENYI, schema.NUCLEUS_SIZE, schema.NUCLEUS_JACCARD, schema.TOP1_ID):
            self.arrays[name][rows, step] = getattr(sm, name)

    def put_routing(self, rows: np.ndarray, step: int, entropy: np.ndarray, experts: np.ndarray) -> None:
        self.arrays[schema.ROUTING_ENTROPY][rows, step] = entropy
        self.arrays[schema.ROUTING_EXPERTS][rows, step] = experts


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
    generation: GenerationSettings | None = None,
    lens: LensSettings | None = None,
    batch_size: int = 8,
    chat_template: bool = False,
    prompt_ids: Sequence[str] | None = None,
    sample_seeds: Sequence[int] | None = None,
    progress: Callable[[int], None] | None = None,
    readout: Readout | None = None,
    max_new_tokens: int | None = None,
    top_p: float | None = None,
    alphas: Sequence[float] | None = None,
    budget_bytes: int | None = None,
    do_sample: bool | None = None,
    temperature: float | None = None,
    seed: int | None = None,
) -> xr.Dataset:
    """Generate from each prompt and record the entropy profile of every new token.

    Settings come either as objects (``generation=``, ``lens=``) or, for quick use, as
    the keywords that mirror their fields (``max_new_tokens``, ``do_sample``,
    ``temperature``, ``seed``; ``top_p``, ``alphas``, ``budget_bytes``); a keyword left
    out takes the field's default.  Giving one setting both ways raises ``ValueError``.

    Args:
        lm: Model from :func:`entropy_lens.load_model`.
        prompts: ``N`` prompt texts (before any chat template).
        generation: Token choice and the token slots ``T`` per prompt.
        lens: Nucleus mass, Renyi orders and the memory budget of the lens.
        batch_size: Prompts per forward pass (prompts are length-sorted into batches).
        chat_template: Render each prompt as a user turn with the model's template.
        prompt_ids: Stable ids (default ``p0000``...).
        sample_seeds: Per-prompt sampling seeds (default derived from the seed and the
            prompt's position), so a prompt samples the same whatever its batch.
        progress: Called with the number of prompts finished after each batch.
        readout: Choices whose log-probabilities to read from the model's own next-token
            distribution at the first generated position (variable ``choice_logprob``,
            NaN for the rows the readout marks unreadable).
        max_new_tokens, do_sample, temperature, seed: Fields of ``generation``.
        top_p, alphas, budget_bytes: Fields of ``lens``.

    Returns:
        A dataset following :mod:`entropy_lens.store.schema` with dims
        ``(prompt, token, layer, alpha)``.
    """
    if lm.readout is not None:
        raise ValueError(
            f"model {lm.name!r} is an image classifier: it profiles images (the 'images' dataset, "
            "entropy_lens.lens.vision.extract_image_profiles), not text prompts"
        )
    keywords = dict(max_new_tokens=max_new_tokens, do_sample=do_sample, temperature=temperature, seed=seed)
    settings = _settings(GenerationSettings, "generation", generation, keywords)
    lens = _settings(LensSettings, "lens", lens, dict(top_p=top_p, alphas=alphas, budget_bytes=budget_bytes))
    ids = _check_prompts(prompts, prompt_ids, batch_size)
    encoded, rendered = encode_prompts(lm, prompts, chat_template=chat_template)
    check_context(lm, encoded, settings.max_new_tokens, ids)
    n_choices = _check_readout(readout, len(prompts))
    routers = find_routers(lm.blocks, getattr(lm.model, "config", None))
    buf = ProfileBuffers(
        len(prompts), settings.max_new_tokens, lm.n_layers, len(lens.alphas), max_top_k(routers), n_choices
    )
    seeds = _sample_seeds(sample_seeds, settings.seed, len(prompts))
    for rows in batches([len(e) for e in encoded], batch_size):
        batch = [encoded[r] for r in rows]
        choice_ids = None if readout is None else np.asarray(readout.token_ids)[rows]
        _run_batch(lm, batch, rows, [seeds[r] for r in rows], settings, lens, buf, routers, choice_ids)
        if progress is not None:
            progress(len(rows))
    attrs = _attrs(lm, lens, settings, chat_template)
    labels = () if readout is None else readout.labels
    return build_dataset(buf.arrays, ids, rendered, lm.n_layers, lens.alphas, attrs, labels)


def _check_readout(readout: Readout | None, n_prompts: int) -> int:
    if readout is None:
        return 0
    if not isinstance(readout, Readout):
        raise TypeError(f"readout must be a Readout, got {type(readout).__name__}")
    if len(readout.token_ids) != n_prompts:
        raise ValueError(f"readout has token ids for {len(readout.token_ids)} prompts, expected {n_prompts}")
    return len(readout.labels)


def _settings(cls: type, name: str, given: object | None, keywords: dict):
    """``given`` (an instance of ``cls``), or one built from the keywords that are not ``None``."""
    keywords = {key: value for key, value in keywords.items() if value is not None}
    if given is None:
        if cls is GenerationSettings and "max_new_tokens" not in keywords:
            raise ValueError("max_new_tokens is required: pass it, or generation=GenerationSettings(...)")
        return cls(**keywords)
    if not isinstance(given, cls):
        raise TypeError(f"{name} must be a {cls.__name__}, got {type(given).__name__}")
    if keywords:
        both = ", ".join(keywords)
        raise ValueError(
            f"{both} given both as keyword and in {name}={cls.__name__}(...); set each setting in one place only"
        )
    return given


def _sample_seeds(sample_seeds: Sequence[int] | None, seed: int, n_prompts: int) -> list[int]:
    seeds = list(sample_seeds) if sample_seeds is not None else [row_seed(seed, i) for i in range(n_prompts)]
    if len(seeds) != n_prompts:
        raise ValueError(f"sample_seeds must hold {n_prompts} seeds, got {len(seeds)}")
    return seeds


def check_context(lm: LensModel, encoded: Sequence[Sequence[int]], max_new_tokens: int, ids: Sequence[str]) -> None:
    """Refuse, before any work, prompts that would run past the model's context window.

    Raises:
        ValueError: naming the longest such prompt, its length and the window (GPT-2's is
            1,024 tokens: some MMLU questions do not fit it).
    """
    window = getattr(lm.model.config, "max_position_embeddings", None) or getattr(lm.model.config, "n_positions", None)
    if not window:
        return
    need = [len(e) + max_new_tokens for e in encoded]
    over = [i for i, n in enumerate(need) if n > window]
    if over:
        worst = max(over, key=need.__getitem__)
        raise ValueError(
            f"{len(over)} prompts need more than {lm.name}'s context of {window} tokens, e.g. {ids[worst]!r} "
            f"({len(encoded[worst])} prompt + {max_new_tokens} new tokens); leave the model out of this "
            "dataset (datasets.<name>.models) or shorten the prompts"
        )


def _check_prompts(prompts: Sequence[str], prompt_ids: Sequence[str] | None, batch_size: int) -> list[str]:
    if isinstance(prompts, str) or not len(prompts):
        raise ValueError(f"prompts must be a non-empty list of strings, got {prompts!r}")
    if not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    ids = list(prompt_ids) if prompt_ids is not None else [f"p{i:04d}" for i in range(len(prompts))]
    if len(ids) != len(prompts) or len(set(ids)) != len(ids):
        raise ValueError(f"prompt_ids must be {len(prompts)} distinct ids, got {len(ids)} ({len(set(ids))} distinct)")
    return [str(i) for i in ids]


def _run_batch(lm, batch, rows, seeds, settings, lens, buf, routers: list[Router | None], choice_ids) -> None:
    moe = any(r is not None for r in routers)
    with record_routing(routers) as routing:

        def on_step(step: int, resid: torch.Tensor, logits: torch.Tensor, alive: torch.Tensor) -> None:
            if step == 0 and choice_ids is not None:
                _read_choices(logits, choice_ids, rows, buf)
            live = alive.cpu().numpy()
            if live.any():
                sm = decode_residuals(lm, resid[alive], lens)
                buf.put(rows[live], step, sm)
                if moe:
                    live_slots = [None if s is None else s[alive] for s in routing]
                    buf.put_routing(rows[live], step, *routing_metrics(live_slots, routers))

        tokens = generate(lm, batch, settings, on_step, row_seeds=seeds)
    buf.arrays[schema.TOKEN_ID][rows] = tokens.cpu().numpy().astype(np.int32)


def _read_choices(logits: torch.Tensor, choice_ids: np.ndarray, rows: np.ndarray, buf: ProfileBuffers) -> None:
    """Log-probabilities of the readable rows' choice tokens under the model's own ``[B, V]`` logits."""
    ok = (choice_ids >= 0).all(axis=1)
    if ok.any():
        readable = logits[torch.as_tensor(ok, device=logits.device)]
        buf.arrays[schema.CHOICE_LOGPROB][rows[ok]] = gather_logprobs(readable, choice_ids[ok])


def gather_logprobs(logits: torch.Tensor, ids: Sequence[Sequence[int]] | np.ndarray) -> np.ndarray:
    """``[B, C]`` float32 log-probabilities of token ``ids[b][c]`` under ``[B, V]`` logits."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    index = torch.as_tensor(np.asarray(ids), dtype=torch.long, device=logp.device)  # [B, C]
    return logp.gather(1, index).cpu().numpy()


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
    choices: Sequence[str] = (),
) -> xr.Dataset:
    """Wrap metric arrays into a schema-conformant dataset (validated before return).

    ``choices`` labels the ``choice`` dim of ``choice_logprob`` when ``arrays`` holds it.
    """
    layers = np.arange(n_layers, dtype=np.int32)
    coords = {
        schema.PROMPT: np.asarray(prompt_ids, dtype=object),
        schema.PROMPT_TEXT: (schema.PROMPT, np.asarray(rendered, dtype=object)),
        schema.TOKEN: np.arange(arrays[schema.TOKEN_ID].shape[1], dtype=np.int32),
        schema.LAYER: layers,
        schema.DEPTH: (schema.LAYER, schema.depth_of(layers, n_layers)),
        schema.ALPHA: np.asarray(alphas, dtype=np.float64),
    }
    specs = {
        **schema.VARIABLES,
        **{k: v for k, v in schema.ROUTING_VARIABLES.items() if k in arrays},
        **schema.optional_variables(arrays),
    }
    data_vars = {
        name: (spec.dims, arrays[name], {"units": spec.units, "long_name": spec.description})
        for name, spec in specs.items()
    }
    if choices:
        coords[schema.CHOICE] = np.asarray(choices, dtype=object)
    if schema.ROUTING_EXPERTS in arrays:
        coords[schema.EXPERT_RANK] = np.arange(arrays[schema.ROUTING_EXPERTS].shape[-1], dtype=np.int32)
    ds = xr.Dataset(data_vars, coords=coords, attrs=attrs)
    schema.validate_profiles(ds)
    return ds
