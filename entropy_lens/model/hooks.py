"""Temporary model surgery through forward hooks, always undone on exit.

* :func:`record_residuals` keeps every block's output at the position the lens decodes: the
  last one of a causal LM (at each generation step), an image classifier's read-out vector
  (:func:`entropy_lens.model.vision.read_out`); :func:`record_block_outputs` keeps every position
  (the corpus a fitted lens learns from);
* :func:`skip_blocks` makes chosen blocks pass their input through unchanged (layer
  skipping, with or without a KV cache);
* :func:`capture_block_calls` keeps how chosen blocks were called, so that
  :func:`run_blocks` can rerun the model from there (layer skipping with a shared prefix), for the
  whole batch or some of its prompts (:func:`calls_of_rows`).

Both are context managers that remove their hooks in ``finally``, also on error.
Skipping is not trained early exit: the skipped blocks are simply bypassed in a model
trained with them.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from entropy_lens.core.checks import check_layers
from entropy_lens.model.lens_model import LensModel
from entropy_lens.model.vision import read_out

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def record_residuals(lm: LensModel) -> Iterator[list[torch.Tensor | None]]:
    """Hook every block to keep the vector the lens decodes from its output ``[B, S, d]`` (``[B, d]`` each):
    the last position of a causal LM, the read-out vector of an image classifier (``lm.readout``).

    Each slot is a copy, not a view: a view of one position would keep its block's whole output
    alive, ``L B S d`` values for the forward pass and the step after it (184 MiB for a batch of eight
    348-token MMLU prompts of SmolLM2-135M in float32). The hooks are removed when the context exits,
    also on error.
    """
    readout = lm.readout
    with _record_blocks(lm, lambda h: (h[:, -1, :] if readout is None else read_out(h, readout)).clone()) as slots:
        yield slots


@contextlib.contextmanager
def record_block_outputs(lm: LensModel) -> Iterator[list[torch.Tensor | None]]:
    """Hook every block to keep its whole output ``[B, S, d]`` (every position; fitting a lens reads them all).

    The hooks are removed when the context exits, also on error.
    """
    with _record_blocks(lm, lambda h: h) as slots:
        yield slots


@contextlib.contextmanager
def _record_blocks(lm: LensModel, pick: Callable[[torch.Tensor], torch.Tensor]) -> Iterator[list[torch.Tensor | None]]:
    """Keep ``pick(output)`` of every block's hidden output, one slot per block; hooks removed on exit."""
    slots: list[torch.Tensor | None] = [None] * lm.n_layers

    def make_hook(index: int):
        def hook(_module, _args, output):
            hidden = output[0] if isinstance(output, (tuple, list)) else output
            slots[index] = pick(hidden).detach()

        return hook

    handles = [block.register_forward_hook(make_hook(i)) for i, block in enumerate(lm.blocks)]
    try:
        yield slots
    finally:
        for handle in handles:
            handle.remove()


def _first_param(block: nn.Module) -> str:
    """Name of the first parameter of ``block.forward`` (the residual stream input)."""
    params = list(inspect.signature(block.forward).parameters)
    if not params:
        raise ValueError(f"block {type(block).__name__} takes no arguments; cannot find its residual input")
    return params[0]


def _skip_hook(name: str) -> Callable[..., Any]:
    """A forward hook (``with_kwargs=True``) that replaces the block's hidden output by its input."""

    def hook(module: nn.Module, args: tuple, kwargs: dict, output: Any) -> Any:
        hidden = args[0] if args else kwargs.get(name)
        if not isinstance(hidden, torch.Tensor):
            raise ValueError(f"block {type(module).__name__} was called without its residual input {name!r}")
        if isinstance(output, torch.Tensor):
            return hidden
        if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
            return type(output)((hidden, *output[1:]))
        raise TypeError(
            f"block {type(module).__name__} returned {type(output).__name__}; skipping supports blocks that "
            "return the hidden states as a tensor or as the first element of a tuple"
        )

    return hook


@contextlib.contextmanager
def skip_blocks(lm: LensModel, layers: Iterable[int]) -> Iterator[tuple[int, ...]]:
    """Make each listed block's output equal its input while the context is open.

    The whole residual write of a skipped block (attention and MLP) is removed: the
    residual stream after block ``i`` equals the one after block ``i - 1`` (or the
    embeddings for ``i = 0``).  Implementation: a forward hook registered with
    ``with_kwargs=True`` and ``prepend=True`` replaces the block's hidden-state output
    (a tensor, or the first element of a tuple on older conventions) by its input
    (the first argument of ``forward``, positional or keyword).  Why a hook that lets
    the block run rather than a wrapper that skips its computation:

    * KV caches: with a cache, every attention layer appends its keys/values, and the
      model reads cache lengths from particular layers (``get_seq_length`` of layer
      0 for positions; the first full and first sliding layer for mask sizes). A
      block that never runs leaves its cache layer empty and breaks decoding. Letting
      it run keeps every cache layer as long as in the intact model; its keys/values
      are read only by its own attention, whose output is discarded, so they cannot
      leak into the result.
    * Return conventions and attributes: the block object stays in place, so model
      loops that read ``decoder_layer.attention_type`` or index ``config.layer_types``
      work, and tensor vs tuple returns are mirrored from the real output.
    * Other hooks (e.g. the residual recorder of :mod:`entropy_lens.model.generation`) see
      the skipped output because this hook is prepended.

    The price is that a skipped block costs as much compute as an intact one; skipping
    is an intervention, not a speed-up.

    Args:
        lm: The model.
        layers: Block indices ``0..L-1`` to skip, each at most once; empty means none.

    Yields:
        The skipped indices, as a tuple of ints.

    Raises:
        TypeError: for a non-integer index.
        ValueError: for an index out of range or listed twice (the model is untouched).
    """
    indices = check_layers(layers, lm.n_layers)
    handles = []
    try:
        for index in indices:
            block = lm.blocks[index]
            hook = _skip_hook(_first_param(block))
            handles.append(block.register_forward_hook(hook, with_kwargs=True, prepend=True))
        if indices:
            logger.debug("skipping blocks %s of %s", indices, lm.name)
        yield tuple(indices)
    finally:
        for handle in handles:
            handle.remove()


@dataclass(frozen=True)
class BlockCall:
    """How the model called one block: its residual input (where kept) and every other argument.

    Attributes:
        hidden: ``[B, S, d]`` residual stream entering the block, or ``None`` where not kept.
        args: The other positional arguments, as passed.
        kwargs: The keyword arguments (attention mask, position embeddings, ...), as passed.
    """

    hidden: torch.Tensor | None
    args: tuple
    kwargs: dict[str, Any]


@contextlib.contextmanager
def capture_block_calls(lm: LensModel, starts: Iterable[int]) -> Iterator[dict[int, BlockCall]]:
    """Keep how every block was called during the forward pass run inside the context.

    A forward pre-hook (``with_kwargs=True``) on each block records its arguments besides
    the residual input (masks, rotary embeddings: per block, since layers of different
    types, sliding or global, get different ones) and, for the blocks listed in
    ``starts``, the residual input itself.  None of these arguments depend on the
    residual stream, so the model can be rerun from any of ``starts``
    (:func:`run_blocks`).  The hooks are removed when the context exits, also on error.

    Yields:
        ``{block index: BlockCall}`` for every block, filled by the forward pass.
    """
    kept = set(check_layers(starts, lm.n_layers))
    calls: dict[int, BlockCall] = {}

    def make_hook(index: int, name: str):
        def hook(_module: nn.Module, args: tuple, kwargs: dict) -> None:
            if args:
                hidden, rest_args, rest = args[0], tuple(args[1:]), dict(kwargs)
            else:
                hidden, rest_args, rest = kwargs[name], (), {k: v for k, v in kwargs.items() if k != name}
            calls[index] = BlockCall(hidden if index in kept else None, rest_args, rest)

        return hook

    handles = [
        block.register_forward_pre_hook(make_hook(i, _first_param(block)), with_kwargs=True)
        for i, block in enumerate(lm.blocks)
    ]
    try:
        yield calls
    finally:
        for handle in handles:
            handle.remove()


def calls_of_rows(calls: dict[int, BlockCall], rows: Sequence[int], batch: int) -> dict[int, BlockCall]:
    """The recorded calls of a sub-batch: the prompts ``rows`` of a batch of ``batch`` (to rerun them alone).

    Every tensor argument whose first dimension is the batch's and that has at least two dimensions (the
    residual input, attention masks ``[B, 1, S, S]``, per-prompt rotary tables ``[B, S, d]``, positions
    ``[B, S]``) keeps only ``rows``; the rest (shared tables ``[1, S, d]``, cache positions ``[S]``, flags)
    pass as they are.  Rerunning the sub-batch from these calls equals the full batch's rerun on those rows
    (tested on six architectures).
    """
    index = torch.as_tensor(list(rows), dtype=torch.long)

    def pick(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dim() >= 2 and value.shape[0] == batch:
            return value.index_select(0, index.to(value.device))
        if isinstance(value, tuple):
            return tuple(pick(v) for v in value)
        if isinstance(value, list):
            return [pick(v) for v in value]
        if isinstance(value, dict):
            return {k: pick(v) for k, v in value.items()}
        return value

    return {
        i: BlockCall(None if c.hidden is None else pick(c.hidden), pick(c.args), pick(c.kwargs))
        for i, c in calls.items()
    }


def run_blocks(lm: LensModel, calls: dict[int, BlockCall], start: int, skip: Iterable[int] = ()) -> torch.Tensor:
    """Run blocks ``start .. L-1`` as :func:`capture_block_calls` recorded them, leaving out ``skip``.

    The intact model's blocks before ``start`` are not recomputed: every skip condition
    whose first skipped block is ``start`` or later can share them.  A skipped block
    passes its input through (as :func:`skip_blocks` makes it) without being computed.
    No cache is read or written (the recorded pass ran with ``use_cache=False``).

    Args:
        lm: The model.
        calls: The recorded calls; ``calls[start]`` must hold its residual input.
        start: First block to run.
        skip: Blocks to leave out.

    Returns:
        ``[B, S, d]`` the residual stream after the last block (before the final norm).

    Raises:
        ValueError: when the residual input of block ``start`` was not kept.
    """
    skipped = set(check_layers(skip, lm.n_layers))
    hidden = calls[start].hidden if start in calls else None
    if hidden is None:
        raise ValueError(f"the input of block {start} was not kept; list it in capture_block_calls(starts=...)")
    for index in range(start, lm.n_layers):
        if index in skipped:
            continue
        output = lm.blocks[index](hidden, *calls[index].args, **calls[index].kwargs)
        hidden = output[0] if isinstance(output, (tuple, list)) else output
    return hidden
