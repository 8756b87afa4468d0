"""The per-model jobs of a plan: fitting a lens (per kind) and the layer-skip experiment (selection, evaluation),
with what each costs in forward passes; :mod:`entropy_lens.workflow.plan.config` adds them to a config's jobs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from entropy_lens.prompts.counts import curve_sizes
from entropy_lens.workflow.plan.cost import FIT_LENS, SKIP_EVAL, SKIP_SELECT, Job, Workload
from entropy_lens.workflow.plan.prompts import ModelContext, PromptLengths, PromptStats
from entropy_lens.workflow.plan.settings import config_value
from entropy_lens.workflow.plan.shapes import ModelShape

# extract_profiles' default batch size, which the layer-skip scripts use (they pass none).
LIBRARY_BATCH_SIZE = 8


def lens_fit_jobs(
    lenses: Mapping, model: ModelContext, prompts: PromptLengths, batch: int, dtype_bytes: int
) -> list[Job]:
    """One fit_lens job per kind: a forward pass over the corpus (the linear lens sums its normal equations
    from it, held in float64 for the whole job, and solves them at each size of its learning curve), the held-out
    questions decoded at every block of their last positions under the logit lens and the fitted kind at each size
    (planned as that many lens passes of that many rows, their forward passes counted as often: a small
    overcount), and for a tuned lens, per Adam step, a forward pass of
    one batch and every block's head forward and backward (three lens passes of every position). Each batch
    records every block's output at every position beside its forward pass, and stacks the real positions
    (:func:`_recorded_residuals`)."""
    spec = {"styles": ["base"], "n_shot": 0}  # prepare_lens_corpus builds zero-shot base-style prompts
    n_fit, n_held = config_value(lenses, "fit_prompts"), config_value(lenses, "held_out_prompts")
    fit = prompts.stats(model, "lens_fit", chat=False, spec={**spec, "n_questions": n_fit})
    held = prompts.stats(model, "lens_held_out", chat=False, spec={**spec, "n_questions": n_held})
    corpus = Workload(n_fit, fit.mean_tokens, fit.max_tokens, 0, batch)
    positions = config_value(lenses, "held_out_positions")
    recorded = _recorded_residuals(model.shape, batch * max(fit.max_tokens, held.max_tokens), dtype_bytes)
    jobs = []
    for kind in config_value(lenses, "kinds"):
        # the logit lens and the fitted kind at each size of its learning curve (the linear lens's alone has one)
        sizes = len(curve_sizes(n_fit, config_value(lenses, "curve_points"))) if kind == "linear" else 1
        judged = Workload(n_held, held.mean_tokens, held.max_tokens, positions, batch, 1, 1 + sizes)
        work: tuple[Workload, ...] = (corpus, judged)
        normal = (0, 0.0, 0.0)
        if kind == "linear":
            held_bytes, summed, solve = _normal_equations(
                model.shape.hidden_size, model.shape.n_layers - 1, n_fit * fit.mean_tokens
            )
            normal = (held_bytes, summed, sizes * solve)
        if kind == "tuned":
            rows = max(round(fit.mean_tokens), 1)
            work += (
                Workload(batch, fit.mean_tokens, fit.max_tokens, rows, batch, 1, 3 * config_value(lenses, "steps")),
            )
        jobs.append(Job(FIT_LENS, model.name, kind, 0, 1, model.shape, work, fit.source, *normal, recorded))
    return jobs


def _recorded_residuals(shape: ModelShape, tokens: int, dtype_bytes: int) -> int:
    """Bytes of one batch's recorded block outputs: every block at every position (``tokens``, padded), the real
    positions stacked, and one block's float64 rows with the final block's (the linear lens's sums)."""
    return 2 * tokens * shape.n_layers * shape.hidden_size * dtype_bytes + 2 * tokens * (shape.hidden_size + 1) * 8


def _normal_equations(d: int, blocks: int, tokens: float) -> tuple[int, float, float]:
    """A linear lens's float64 normal equations: the bytes of its Gram matrices and cross terms (held all
    job), the FLOPs that sum them over the corpus (on the device) and those that solve them (on the host:
    Cholesky, or an eigendecomposition where the corpus has fewer tokens than the ``d + 1`` coefficients)."""
    n = d + 1
    held = 8 * blocks * n * (2 * d + 1)
    summed = 2.0 * tokens * blocks * n * (2 * d + 1)
    solve = blocks * (n**3 / 3 + 2.0 * n * n * d) if tokens > n else blocks * 9.0 * n**3
    return held, summed, solve


def _scoring(stats: PromptStats, batch: int, repeats: int = 1) -> Workload:
    """One forward pass per prompt; the letter's separator token is fed too."""
    return Workload(stats.prompts, stats.mean_tokens + 1, stats.max_tokens + 1, 0, batch, 0, repeats)


def layer_skip_jobs(
    skip: Mapping, model: ModelContext, prompts: PromptLengths, batch: int, *, fitted: bool = False
) -> list[Job]:
    """The selection and evaluation jobs of one model's layer-skip experiment (``fitted``: a linear lens is fitted
    for the model, so the selection reads the calibration questions through it too and chooses twice as many
    blocks)."""
    chat, ks, style = model.chat_template, config_value(skip, "ks"), config_value(skip, "style")
    spec = {"styles": [style], "n_shot": 0}  # prepare_layer_skip builds zero-shot prompts in one style
    n_cal, n_eval = config_value(skip, "calibration_questions"), config_value(skip, "eval_questions")
    lenses, variants = 2 if fitted else 1, len(config_value(skip, "variants"))
    cal = prompts.stats(model, "layer_skip_calibration", chat=chat, spec={**spec, "n_questions": n_cal})
    # Calibration reads the answer position (one generated token), through each lens.
    select = Workload(n_cal, cal.mean_tokens, cal.max_tokens, 1, LIBRARY_BATCH_SIZE, 1, lenses)
    ev = prompts.stats(model, "layer_skip_eval", chat=chat, spec={**spec, "n_questions": n_eval})
    n_layers = model.shape.n_layers
    n_sweep = min(config_value(skip, "sweep_questions"), n_eval)
    sweep = prompts.stats(model, "layer_skip_eval", chat=chat, spec={**spec, "n_questions": n_sweep})
    scoring: tuple[Workload, ...] = (_scoring(sweep, batch, sweep_passes(n_layers)),)
    if n_eval > n_sweep:  # the paired design's other questions (on the sweep's, the sweep holds every block)
        paired = paired_passes(n_layers, 1, 2 * lenses * variants, variants)
        scoring += (Workload(n_eval - n_sweep, ev.mean_tokens + 1, ev.max_tokens + 1, 0, batch, 0, paired),)
    # The readings of every block (the criteria): the lens at every position, as one generated token decoded.
    scoring += (Workload(n_eval, ev.mean_tokens, ev.max_tokens, 1, batch, 1, lenses),)
    n_profiled = min(config_value(skip, "profile_prompts"), n_eval)
    # Profiles read the answer position only: one generated token, intact and each selected block or set.
    chosen = 1 + 2 * lenses * variants * len(ks)
    scoring += (Workload(n_profiled, ev.mean_tokens, ev.max_tokens, 1, LIBRARY_BATCH_SIZE, 1, chosen),)
    if any(k >= 2 for k in ks):
        n_sets = min(config_value(skip, "set_questions"), n_eval)
        sets = prompts.stats(model, "layer_skip_eval", chat=chat, spec={**spec, "n_questions": n_sets})
        passes = sum(paired_passes(n_layers, k, 2 * lenses * variants, variants) - 1 for k in ks if k >= 2)
        scoring += (_scoring(sets, batch, max(1, passes)),)
    n_drop = min(config_value(skip, "drop_questions"), n_eval)
    ks_drop = drop_ks(n_layers, config_value(skip, "drop_shares"))
    if n_drop and ks_drop:
        drop = prompts.stats(model, "layer_skip_eval", chat=chat, spec={**spec, "n_questions": n_drop})
        passes = sum(drop_passes_of(n_layers, k, variants) for k in ks_drop)
        scoring += (_scoring(drop, batch, passes),)
    return [
        Job(SKIP_SELECT, model.name, "", 0, 1, model.shape, (select,), cal.source),
        Job(SKIP_EVAL, model.name, "", 0, 1, model.shape, scoring, ev.source),
    ]


def sweep_passes(n_layers: int) -> int:
    """Whole forward passes the sweep costs per question on the shared prefix.

    The intact pass runs every block; skipping block ``l`` reruns blocks ``l+1 .. L-1``:
    ``L + L (L - 1) / 2`` block passes, ``(L + 1) / 2`` whole passes.
    """
    return math.ceil((n_layers + 1) / 2)


def paired_passes(n_layers: int, k: int, n_chosen: int, n_variants: int) -> int:
    """Whole forward passes the paired design of one ``k`` costs per question on the shared prefix (an estimate).

    The intact pass; up to ``n_chosen`` selected sets (expansion and pruning per lens and variant), each counted
    as two thirds of a pass (the blocks after its first: an expansion block sits early, a pruning block late);
    and one random set per variant, whose first of ``k`` random blocks sits near depth ``1 / (k + 1)``, so it
    reruns about ``k / (k + 1)`` of the blocks.
    """
    del n_layers  # the shares above are of the model's depth, whatever its blocks
    return max(1, math.ceil(1 + n_chosen * 2 / 3 + n_variants * k / (k + 1)))


def drop_ks(n_layers: int, shares: Sequence[float]) -> list[int]:
    """The distinct drop-set sizes of ``shares`` of ``n_layers`` blocks (as :func:`entropy_lens.skipping.pruning.drop_k`
    rounds them, at least 1; those beyond the ``L - 1`` eligible blocks left out)."""
    return sorted({k for k in (max(1, round(s * n_layers)) for s in shares) if k <= n_layers - 1})


def drop_passes_of(n_layers: int, k: int, n_variants: int) -> int:
    """Whole forward passes the ``k``-block drop sets cost per question on the shared prefix (an estimate): the
    intact pass, one random set per variant (its first block near depth ``1 / (k + 1)``) and up to seven chosen
    sets per variant (six criteria and Gromov's span) counted as half a pass each (most criteria drop late blocks,
    a criterion may drop an early one)."""
    del n_layers
    return max(1, math.ceil(1 + n_variants * (k / (k + 1) + 7 * 0.5)))
