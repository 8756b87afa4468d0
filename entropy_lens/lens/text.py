"""The lens on causal language models: generate from each prompt and record the entropy profile
of every new token.

Each step of a KV-cached generation (:func:`entropy_lens.model.generation.generate`) hands
over the residual after every block; :func:`~entropy_lens.lens.decoding.decode_residuals`
decodes them, and mixture-of-experts blocks add their routing.  A :class:`Readout` reads
answer choices off the model's own distribution at the first generated position.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import xarray as xr

from entropy_lens.lens.decoding import LensSettings, decode_residuals, gather_logprobs
from entropy_lens.lens.encoding import PromptSettings, check_context, encode_prompts
from entropy_lens.lens.profiles import ProfileBuffers, build_dataset, profile_attrs
from entropy_lens.lens.translators import Translators
from entropy_lens.model.batching import batch_partners, batches
from entropy_lens.model.generation import GenerationSettings, generate, row_seed
from entropy_lens.model.lens_model import LensModel
from entropy_lens.model.routing import Router, find_routers, max_top_k, record_routing, routing_metrics
from entropy_lens.store import schema


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


def extract_profiles(
    lm: LensModel,
    prompts: Sequence[str],
    *,
    generation: GenerationSettings,
    lens: LensSettings | None = None,
    prompting: PromptSettings | None = None,
    prompt_ids: Sequence[str] | None = None,
    sample_seeds: Sequence[int] | None = None,
    progress: Callable[[int], None] | None = None,
    readout: Readout | None = None,
    translators: Translators | None = None,
    sources: Sequence[str] | None = None,
) -> xr.Dataset:
    """Generate from each prompt and record the entropy profile of every new token.

    Args:
        lm: Model from :func:`entropy_lens.load_model`.
        prompts: ``N`` prompt texts (before any chat template).
        generation: Token choice and the token slots ``T`` per prompt.
        lens: Nucleus mass, Renyi orders and the memory budget of the lens (default :class:`LensSettings`).
        prompting: Batch size and chat template (default :class:`PromptSettings`).
        prompt_ids: Stable ids (default ``p0000``...).
        sample_seeds: Per-prompt sampling seeds (default derived from the seed and the
            prompt's position), so a prompt samples the same whatever its batch.
        progress: Called with the number of prompts finished after each batch.
        readout: Choices whose log-probabilities to read from the model's own next-token
            distribution at the first generated position (variable ``choice_logprob``,
            NaN for the rows the readout marks unreadable).
        translators: A fitted lens (:mod:`entropy_lens.lens.translators`): each block's residual is mapped
            by its translator before the head decodes it (the final block's is the identity; generation
            reads the model's own logits either way). Default: the logit lens. The store records the kind
            and the translators' checksum (attrs ``lens_kind``, ``lens_sha256``).
        sources: ``N`` source of each prompt (its story, topic, question): batches hold at most half of their
            prompts from one source, and each prompt's cross-prompt partner is of another source
            (:func:`entropy_lens.model.batching.batch_partners`). Default: every prompt its own source.

    Returns:
        A dataset following :mod:`entropy_lens.store.schema` with dims
        ``(prompt, token, layer, alpha)``.
    """
    if lm.readout is not None:
        raise ValueError(
            f"model {lm.name!r} is an image classifier: it profiles images (the 'images' dataset, "
            "entropy_lens.lens.vision.extract_image_profiles), not text prompts"
        )
    settings = _checked(GenerationSettings, "generation", generation)
    lens = _checked(LensSettings, "lens", LensSettings() if lens is None else lens)
    prompting = _checked(PromptSettings, "prompting", PromptSettings() if prompting is None else prompting)
    ids = _check_prompts(prompts, prompt_ids)
    encoded, rendered = encode_prompts(lm, prompts, chat_template=prompting.chat_template)
    check_context(lm, encoded, settings.max_new_tokens, ids)
    n_choices = _check_readout(readout, len(prompts))
    if translators is not None:
        translators.check_model(lm)
    routers = find_routers(lm.blocks, getattr(lm.model, "config", None))
    buf = ProfileBuffers(
        len(prompts),
        settings.max_new_tokens,
        lm.n_layers,
        len(lens.alphas),
        max_top_k(routers),
        n_choices,
        keep_top=min(lens.top_k, lm.vocab_size),
        cross=True,
    )
    seeds = _sample_seeds(sample_seeds, settings.seed, len(prompts))
    source = _sources(sources, ids)
    for rows in batches([len(e) for e in encoded], prompting.batch_size, source):
        _run_batch(
            lm,
            [encoded[r] for r in rows],
            rows,
            partners=batch_partners(rows, source[rows], _batch_rng(settings.seed, [ids[r] for r in rows])),
            seeds=[seeds[r] for r in rows],
            settings=settings,
            lens=lens,
            buf=buf,
            routers=routers,
            choice_ids=None if readout is None else np.asarray(readout.token_ids)[rows],
            translators=translators,
        )
        if progress is not None:
            progress(len(rows))
    fitted = {} if translators is None else {"lens_kind": translators.kind, "lens_sha256": translators.digest()}
    attrs = profile_attrs(lm, lens, settings, chat_template=prompting.chat_template, **fitted)
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


def _batch_rng(seed: int, batch_ids: Sequence[str]) -> np.random.Generator:
    """The generator that deals a batch's partners: seeded by the generation seed and the batch's prompt ids, so a
    shard job (whose rows are numbered apart) draws what the whole job draws."""
    digest = zlib.crc32("\n".join(sorted(batch_ids)).encode("utf-8"))
    return np.random.default_rng([seed, digest])


def _sources(sources: Sequence[str] | None, ids: Sequence[str]) -> np.ndarray:
    """``[N]`` source of each prompt as ``str`` objects; each prompt its own source by default."""
    values = np.asarray([str(s) for s in (ids if sources is None else sources)], dtype=object)
    if values.shape != (len(ids),):
        raise ValueError(f"sources must hold one source per prompt ({len(ids)}), got {values.shape[0]}")
    return values


def _checked(cls: type, name: str, given: object) -> Any:
    """``given``, refused unless it is an instance of ``cls``."""
    if not isinstance(given, cls):
        raise TypeError(f"{name} must be a {cls.__name__}, got {type(given).__name__}")
    return given


def _sample_seeds(sample_seeds: Sequence[int] | None, seed: int, n_prompts: int) -> list[int]:
    seeds = list(sample_seeds) if sample_seeds is not None else [row_seed(seed, i) for i in range(n_prompts)]
    if len(seeds) != n_prompts:
        raise ValueError(f"sample_seeds must hold {n_prompts} seeds, got {len(seeds)}")
    return seeds


def _check_prompts(prompts: Sequence[str], prompt_ids: Sequence[str] | None) -> list[str]:
    if isinstance(prompts, str) or not len(prompts):
        raise ValueError(f"prompts must be a non-empty list of strings, got {prompts!r}")
    ids = list(prompt_ids) if prompt_ids is not None else [f"p{i:04d}" for i in range(len(prompts))]
    if len(ids) != len(prompts) or len(set(ids)) != len(ids):
        raise ValueError(f"prompt_ids must be {len(prompts)} distinct ids, got {len(ids)} ({len(set(ids))} distinct)")
    return [str(i) for i in ids]


def _run_batch(
    lm: LensModel,
    batch: list[list[int]],
    rows: np.ndarray,
    *,
    partners: np.ndarray,
    seeds: list[int],
    settings: GenerationSettings,
    lens: LensSettings,
    buf: ProfileBuffers,
    routers: list[Router | None],
    choice_ids: np.ndarray | None,
    translators: Translators | None,
) -> None:
    """Generate from one batch (``rows`` of the prompts, token ids ``batch``) and record its profiles in ``buf``;
    ``partners`` is each row's cross-prompt partner (a prompt index, ``-1``: none), ``choice_ids`` the ``[B, C]``
    choice tokens the first step reads, ``None`` for none."""
    moe = any(r is not None for r in routers)
    buf.arrays[schema.PARTNER][rows] = partners
    with record_routing(routers) as routing:

        def on_step(step: int, resid: torch.Tensor, logits: torch.Tensor, alive: torch.Tensor) -> None:
            if step == 0 and choice_ids is not None:
                _read_choices(logits, choice_ids, rows, buf)
            live = alive.cpu().numpy()
            if live.any():
                live_resid = resid[alive] if translators is None else translators.apply(resid[alive])
                sm = decode_residuals(lm, live_resid, lens, _live_partners(rows, partners, live))
                buf.put(rows[live], step, sm)
                if moe:
                    live_slots = [None if s is None else s[alive] for s in routing]
                    buf.put_routing(rows[live], step, *routing_metrics(live_slots, routers))

        tokens = generate(lm, batch, settings, on_step, row_seeds=seeds)
    buf.arrays[schema.TOKEN_ID][rows] = tokens.cpu().numpy().astype(np.int32)


def _live_partners(rows: np.ndarray, partners: np.ndarray, live: np.ndarray) -> torch.Tensor:
    """``[B_live]`` partner of each live row as a live-row index; ``-1`` where the partner is done (masked)."""
    live_index = dict(zip(rows[live].tolist(), range(int(live.sum())), strict=True))
    return torch.tensor([live_index.get(p, -1) for p in partners[live].tolist()], dtype=torch.int64)


def _read_choices(logits: torch.Tensor, choice_ids: np.ndarray, rows: np.ndarray, buf: ProfileBuffers) -> None:
    """Log-probabilities of the readable rows' choice tokens under the model's own ``[B, V]`` logits."""
    ok = (choice_ids >= 0).all(axis=1)
    if ok.any():
        readable = logits[torch.as_tensor(ok, device=logits.device)]
        buf.arrays[schema.CHOICE_LOGPROB][rows[ok]] = gather_logprobs(readable, choice_ids[ok])
