"""One generation as an interactive page: a token x block heatmap with the lens's top tokens on hover.

The page is one static HTML file with plotly's script embedded, so it opens offline.  Generated
tokens run along the x axis, blocks up the y axis (the last block, the model's own output, always
shown); buttons switch the colour between entropy, the top-p nucleus size and the overlap of a
block's nucleus with the next one.  Hovering a cell shows the lens's top-k tokens and their
probabilities there: from a store extracted with ``lens.top_k`` > 0 (variables ``top_ids`` and
``top_probs``), or from a fresh generation (:func:`generation_from_model`).  A store without them
shows the top-1 token of each cell alone.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xarray as xr

from entropy_lens.store import schema

DEFAULT_TOP_K = 10
COLORSCALE = "Viridis"
CELL_CHARS = 6  # characters of the top-1 token written in a cell
PX_PER_TOKEN, PX_PER_BLOCK = 56, 24
PLOT_DIV = "entropy-view"


@dataclass(frozen=True)
class Generation:
    """What the page shows of one generation: ``T`` generated tokens x ``L`` shown blocks.

    Attributes:
        title: Heading (model and prompt id).
        prompt: The prompt as the model read it.
        tokens: ``[T]`` decoded generated tokens.
        blocks: ``[L]`` block index of each shown row (the last block always among them).
        n_layers: Blocks of the model.
        vocab_size: Size of the lens distribution (entropy is at most its log).
        top_p: Nucleus mass of ``nucleus_size``.
        entropy: ``[T, L]`` Shannon entropy, nats.
        nucleus_size: ``[T, L]`` tokens in the top-p set.
        jaccard: ``[T, L]`` overlap of a block's top-p set with the next block's (NaN at the last).
        top_tokens: ``[T][L][K]`` the lens's most probable tokens, decoded (``K`` = 1 without top-k).
        top_probs: ``[T, L, K]`` their probabilities (NaN where the store kept only the top-1 id).
    """

    title: str
    prompt: str
    tokens: tuple[str, ...]
    blocks: np.ndarray
    n_layers: int
    vocab_size: int
    top_p: float
    entropy: np.ndarray
    nucleus_size: np.ndarray
    jaccard: np.ndarray
    top_tokens: tuple[tuple[tuple[str, ...], ...], ...]
    top_probs: np.ndarray


def shown_blocks(n_layers: int, every: int = 1) -> np.ndarray:
    """Blocks ``0, every, 2 every, ...`` and always the last one (the model's own output)."""
    if not isinstance(every, int) or every < 1:
        raise ValueError(f"every must be a positive integer (1 shows every block), got {every!r}")
    return np.unique(np.r_[np.arange(0, n_layers, every), n_layers - 1]).astype(int)


def generation_of(row: xr.Dataset, decode: Callable[[int], str], *, every: int = 1, title: str = "") -> Generation:
    """The :class:`Generation` of one prompt of a per-model store.

    Args:
        row: One prompt of a per-model store (``store.sel(prompt=...)``): its masked token slots
            (``token_id`` -1) are left out.
        decode: Token id -> text (e.g. ``lambda i: tokenizer.decode([i])``).
        every: Show every ``every``-th block (the last block always).
        title: Heading; default the model name and prompt id.

    Raises:
        ValueError: when ``row`` holds more than one prompt or no generated token.
    """
    if schema.PROMPT in row.dims:
        raise ValueError(f"row must be one prompt (store.sel(prompt=...)), got {row.sizes[schema.PROMPT]} prompts")
    token_ids = row[schema.TOKEN_ID].values
    slots = np.flatnonzero(token_ids >= 0)
    if not slots.size:
        raise ValueError(f"prompt {row[schema.PROMPT].item()!r} has no generated token to show")
    n_layers = row.sizes[schema.LAYER]
    blocks = shown_blocks(n_layers, every)
    cells = row.isel({schema.TOKEN: slots, schema.LAYER: blocks})
    if schema.TOP_IDS in cells:
        ids, probs = cells[schema.TOP_IDS].values, cells[schema.TOP_PROBS].values.astype(float)
    else:
        ids, probs = cells[schema.TOP1_ID].values[..., None], np.full((*cells[schema.TOP1_ID].shape, 1), np.nan)
    cache: dict[int, str] = {}

    def text(token_id: int) -> str:
        if token_id not in cache:
            cache[token_id] = decode(token_id)
        return cache[token_id]

    tops = tuple(tuple(tuple(text(int(i)) for i in cell if i >= 0) for cell in token) for token in ids)
    return Generation(
        title=title or f"{Path(str(row.attrs.get('model_name', 'model'))).name}: prompt {row[schema.PROMPT].item()}",
        prompt=str(row[schema.PROMPT_TEXT].item()),
        tokens=tuple(text(int(t)) for t in token_ids[slots]),
        blocks=blocks,
        n_layers=n_layers,
        vocab_size=int(row.attrs["vocab_size"]),
        top_p=float(row.attrs["top_p"]),
        entropy=cells[schema.ENTROPY].values.astype(float),
        nucleus_size=np.where(cells[schema.NUCLEUS_SIZE].values > 0, cells[schema.NUCLEUS_SIZE].values, np.nan),
        jaccard=cells[schema.NUCLEUS_JACCARD].values.astype(float),
        top_tokens=tops,
        top_probs=probs,
    )


def shown(token: str, max_chars: int | None = None) -> str:
    """A decoded token as the page writes it: control characters escaped, blank tokens made visible,
    HTML escaped (plotly reads tags in labels), cut to ``max_chars``."""
    text = token.encode("unicode_escape").decode("ascii") if not token.isprintable() else token
    text = text if text.strip() else "·" * len(text) or "∅"
    if max_chars is not None and len(text) > max_chars:
        text = text[: max_chars - 1] + "…"
    return html.escape(text, quote=False)  # plotly decodes &amp; &lt; &gt;, not &quot;


def hover_text(gen: Generation, t: int, b: int) -> str:
    """The hover label of token ``t`` at shown block ``b``: the cell's metrics and the lens's top tokens."""
    block = int(gen.blocks[b])
    size, overlap = gen.nucleus_size[t, b], gen.jaccard[t, b]
    lines = [
        f"<b>{shown(gen.tokens[t])}</b> (token {t}) · block {block} of {gen.n_layers}"
        + (" (final)" if block == gen.n_layers - 1 else ""),
        f"entropy {gen.entropy[t, b]:.3f} nats · top-{gen.top_p:g} nucleus "
        + ("n/a" if math.isnan(size) else f"{int(size)} token{'' if size == 1 else 's'}")
        + ("" if math.isnan(overlap) else f" · overlap with next {overlap:.2f}"),
    ]
    probs = gen.top_probs[t, b]
    if np.isnan(probs).all():
        lines.append(f"lens top-1: {shown(gen.top_tokens[t][b][0])}" if gen.top_tokens[t][b] else "")
    else:
        lines.append(f"lens top-{len(gen.top_tokens[t][b])}:")
        lines += [
            f"{k + 1:>2}. {shown(tok)}  {100 * p:.1f}%"
            for k, (tok, p) in enumerate(zip(gen.top_tokens[t][b], probs, strict=False))
        ]
    return "<br>".join(lines)


def _log_ticks(values: np.ndarray) -> tuple[list[float], list[str]]:
    top = max(1, math.ceil(np.nanmax(values))) if np.isfinite(values).any() else 1
    return list(range(top + 1)), [f"{10**i:,}" for i in range(top + 1)]


def _colour_modes(gen: Generation) -> list[tuple[str, np.ndarray, dict]]:
    """Each button: its label, ``[L, T]`` colour values and the colour bar's settings."""
    log_size = np.log10(gen.nucleus_size).T
    ticks, labels = _log_ticks(log_size)
    return [
        (
            "entropy",
            gen.entropy.T,
            {
                "zmin": 0.0,
                "zmax": _top(gen.entropy),
                "title": f"entropy (nats;<br>log V = {math.log(gen.vocab_size):.1f})",
            },
        ),
        (
            "nucleus size",
            log_size,
            {"zmin": 0.0, "zmax": ticks[-1], "title": f"top-{gen.top_p:g} nucleus (tokens)", "ticks": (ticks, labels)},
        ),
        ("overlap with next block", gen.jaccard.T, {"zmin": 0.0, "zmax": 1.0, "title": "Jaccard overlap"}),
    ]


def _top(values: np.ndarray) -> float:
    """The colour scale's top: the largest value rounded up to a whole nat (the range shown, not log V)."""
    return float(max(1, math.ceil(np.nanmax(values)))) if np.isfinite(values).any() else 1.0


def _colorbar(mode: dict) -> dict:
    ticks = mode.get("ticks")
    return {
        "title": {"text": mode["title"]},
        "tickvals": ticks[0] if ticks else None,
        "ticktext": ticks[1] if ticks else None,
    }


def view_figure(gen: Generation):
    """The plotly figure of ``gen`` (x: generated tokens, y: blocks, colour switched by buttons)."""
    import plotly.graph_objects as go

    n_tokens, n_blocks = gen.entropy.shape
    modes = _colour_modes(gen)
    hover = [[hover_text(gen, t, b) for t in range(n_tokens)] for b in range(n_blocks)]
    cell = [[shown(tops[b][0], CELL_CHARS) if tops[b] else "" for tops in gen.top_tokens] for b in range(n_blocks)]
    _, z, first = modes[0]
    heatmap = go.Heatmap(
        z=z,
        x=list(range(n_tokens)),
        y=list(range(n_blocks)),
        zmin=first["zmin"],
        zmax=first["zmax"],
        colorscale=COLORSCALE,
        colorbar=_colorbar(first),
        text=cell,
        texttemplate="%{text}",
        textfont={"size": 9},
        hovertext=hover,
        hovertemplate="%{hovertext}<extra></extra>",
        xgap=1,
        ygap=1,
    )
    buttons = [
        {
            "label": label,
            "method": "restyle",
            "args": [{"z": [values], "zmin": mode["zmin"], "zmax": mode["zmax"], "colorbar": _colorbar(mode)}],
        }
        for label, values, mode in modes
    ]
    block_labels = [f"{int(b)} (final)" if b == gen.n_layers - 1 else str(int(b)) for b in gen.blocks]
    fig = go.Figure(heatmap)
    fig.update_layout(
        xaxis={"title": {"text": "generated token"}, "tickvals": list(range(n_tokens)), "tickangle": -45},
        yaxis={"title": {"text": "block"}, "tickvals": list(range(n_blocks)), "ticktext": block_labels},
        updatemenus=[
            {
                "type": "buttons",
                "direction": "right",
                "x": 0.0,
                "y": 1.0,
                "xanchor": "left",
                "yanchor": "bottom",
                "buttons": buttons,
            }
        ],
        width=max(720, 240 + PX_PER_TOKEN * n_tokens),
        height=max(420, 220 + PX_PER_BLOCK * n_blocks),
        hoverlabel={"align": "left", "font": {"family": "monospace"}},
        plot_bgcolor="white",
        margin={"t": 60},
    )
    fig.update_xaxes(ticktext=[shown(tok, 2 * CELL_CHARS) for tok in gen.tokens])
    return fig


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;margin:1.5em}} .text{{font-family:monospace;white-space:pre-wrap;
background:#f4f4f4;padding:.5em;max-width:70em}} .gen{{background:#fff3b0}}</style></head>
<body><h2>{title}</h2>
<p>Each cell: the logit lens's reading of the residual after that block, at the position that predicts the token
below it. Hover a cell for the lens's top tokens; the buttons switch the colour.{note}</p>
<div class="text">{prompt}<span class="gen">{generated}</span></div>
{plot}
</body></html>
"""


def view_html(gen: Generation) -> str:
    """The page: heading, the prompt with the generated text highlighted, the figure with plotly's script."""
    fig = view_figure(gen)
    note = "" if np.isfinite(gen.top_probs).any() else " This store kept no top-k tokens (lens.top_k: 0): top-1 only."
    plot = fig.to_html(full_html=False, include_plotlyjs=True, div_id=PLOT_DIV, config={"displaylogo": False})
    return PAGE.format(
        title=html.escape(gen.title),
        note=note,
        prompt=html.escape(gen.prompt),
        generated=html.escape("".join(gen.tokens)),
        plot=plot,
    )


def write_view(gen: Generation, path: str | Path) -> Path:
    """Write :func:`view_html` of ``gen`` to ``path`` (``.html``); returns the path."""
    out = Path(path)
    if out.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"the view is an HTML page: its path must end in .html, got {str(path)!r}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(view_html(gen), encoding="utf-8")
    return out


def generation_from_store(
    store: xr.Dataset, decode: Callable[[int], str], prompt_id: str | None = None, *, every: int = 1
) -> Generation:
    """The :class:`Generation` of prompt ``prompt_id`` (default the first) of a per-model store.

    Raises:
        ValueError: for a combined store, or a prompt id the store lacks (naming a few it has).
    """
    if schema.MODEL in store.dims:
        raise ValueError(
            "this is a combined store (several models); view one model's store, results/profiles/<model>/<dataset>.zarr"
        )
    ids = [str(p) for p in store.indexes[schema.PROMPT]]
    prompt_id = ids[0] if prompt_id is None else str(prompt_id)
    if prompt_id not in ids:
        raise ValueError(f"prompt {prompt_id!r} is not in the store; it has {len(ids)} prompts: {ids[:5]}...")
    return generation_of(store.sel({schema.PROMPT: prompt_id}).load(), decode, every=every)


def generation_from_model(
    lm,
    prompt: str,
    *,
    max_new_tokens: int,
    top_k: int = DEFAULT_TOP_K,
    every: int = 1,
    top_p: float | None = None,
    chat_template: bool = False,
) -> Generation:
    """Generate greedily from ``prompt`` with ``lm`` (a :class:`~entropy_lens.model.lens_model.LensModel`) and keep
    the lens's top ``top_k`` tokens of every cell; ``top_p`` is the lens's nucleus mass (default
    :class:`~entropy_lens.lens.decoding.LensSettings`'), ``chat_template`` renders the prompt as a user turn."""
    from entropy_lens.lens.decoding import LensSettings
    from entropy_lens.lens.encoding import PromptSettings
    from entropy_lens.lens.text import extract_profiles
    from entropy_lens.model.generation import GenerationSettings

    if not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be a positive integer (the tokens shown on hover), got {top_k!r}")
    lens = LensSettings(top_p=LensSettings.top_p if top_p is None else top_p, top_k=top_k)
    ds = extract_profiles(
        lm,
        [prompt],
        generation=GenerationSettings(max_new_tokens),
        lens=lens,
        prompting=PromptSettings(chat_template=chat_template),
    )
    decode = decoder(lm.tokenizer)
    return generation_of(
        ds.isel({schema.PROMPT: 0}), decode, every=every, title=f"{Path(lm.name).name}: a fresh generation"
    )


def decoder(tokenizer) -> Callable[[int], str]:
    """Token id -> text with ``tokenizer`` (special tokens kept, so an end of text shows)."""
    return lambda token_id: tokenizer.decode([int(token_id)])


def generation_from_path(
    path: str | Path,
    prompt_id: str | None,
    tokenizer: str | None,
    *,
    every: int = 1,
    cache_dir: str | None = None,
    model: str | None = None,
) -> Generation:
    """:func:`generation_from_store` of the store at ``path`` (of a combined store, ``model``'s:
    :func:`per_model_store`), its tokens decoded by ``tokenizer`` (a model folder or hub id), by default found by
    :func:`tokenizer_folder` in the store's ``model_name``, the model cache (``cache_dir``, default
    :func:`~entropy_lens.model.loading.default_cache_dir`) and the workflow's ``resources/models`` under the
    working directory."""
    from entropy_lens.model.loading import default_cache_dir, load_tokenizer
    from entropy_lens.store.combine import per_model_store
    from entropy_lens.store.storage import open_profiles

    store = open_profiles(per_model_store(path, model))
    name = Path(str(store.attrs.get("model_name", ""))).name
    places = [Path(cache_dir) if cache_dir else default_cache_dir(), Path("resources/models")]
    folder = tokenizer_folder(store, tokenizer, [place / name for place in places])
    return generation_from_store(store, decoder(load_tokenizer(folder)), prompt_id, every=every)


def tokenizer_folder(store: xr.Dataset, given: str | None, candidates: Sequence[Path]) -> str:
    """Where the tokenizer of ``store``'s model is: ``given``, else the store's ``model_name`` if it is a
    folder, else the first of ``candidates`` that exists.

    Raises:
        ValueError: naming the places searched and the ``--tokenizer`` option.
    """
    if given is not None:
        return given
    name = str(store.attrs.get("model_name", ""))
    places = [Path(name), *candidates]
    for place in places:
        if name and place.is_dir():
            return str(place)
    raise ValueError(
        f"no tokenizer found for the store's model {name!r} (searched {[str(p) for p in places]}); "
        "pass --tokenizer with its model folder or hub id"
    )
