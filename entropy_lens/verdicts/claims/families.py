"""The family claims: family shapes (:mod:`entropy_lens.analysis.families.shapes`) and the same-family pairs (family,
not size; size as resolution: :mod:`entropy_lens.analysis.families.pairs`).

Each claim as one object: its record, its row rule, the paper-table inputs it reads and its planted null.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import xarray as xr

from entropy_lens.analysis.families.gaps import ALIGNMENT_GAP, FAMILY_GAP
from entropy_lens.analysis.families.pairs import COLUMNS as PAIR_COLUMNS
from entropy_lens.analysis.families.pairs import PAIR_READING, family_pairs
from entropy_lens.analysis.families.scales import NATS as NATS_SCALE
from entropy_lens.analysis.families.scales import NORMALIZED
from entropy_lens.analysis.families.shapes import COLUMNS as SHAPE_COLUMNS
from entropy_lens.analysis.families.shapes import SHAPE_READING, profile_shapes
from entropy_lens.analysis.families.shapes import STATISTICS as SHAPE_STATISTICS
from entropy_lens.core.frames import ESTIMATE, HIGH, LOW
from entropy_lens.verdicts import decision, rules, study
from entropy_lens.verdicts.claim import EXTENSION, FINDING, HEADLINE_SCALE, Claim, Headline
from entropy_lens.verdicts.inputs import LOGIT_LENS_ONLY, WITH_FAMILIES, PaperInput, StoreSettings, families_read
from entropy_lens.verdicts.rows import (
    Expected,
    Record,
    RowRule,
    family_shortfall,
    interval,
    pair_shortfall,
    row,
    rows_of,
    text,
)
from entropy_lens.verdicts.tested import FAMILY_PAIR, SHAPE, PlantedNull, TestedClaim, TwinRule
from entropy_lens.verdicts.units import LOG_V, NATS

CLUSTERING = Claim(
    id="clustering",
    name="family, not size, clusters blank-prompt profiles",
    sentence="blank-prompt profiles cluster by model family, not size",
    role=FINDING,
    unit="blank samples",
    dataset="blank",
    rule=rules.family_not_size,
    figure="family",
    headline=Headline(measures=(HEADLINE_SCALE, "")),
)

SIZE_RESOLUTION = Claim(
    id="size_resolution",
    name="size as resolution: normalized depth aligns a family's sizes better than absolute layer",
    sentence="after depth normalization a smaller model looks like a coarser sampling of the same schedule",
    role=FINDING,
    unit="blank samples",
    dataset="blank",
    rule=rules.size_resolution,
    figure="resolution",
    headline=Headline(measures=(HEADLINE_SCALE, "")),
)

SHAPE_GPT = Claim(
    id="shape_gpt",
    name="GPT profiles start high and sharpen",
    sentence="GPT profiles start high and sharpen",
    role=FINDING,
    unit="prompts",
    dataset="",
    rule=rules.family_shape,
    figure="shape",
)

SHAPE_LLAMA = Claim(
    id="shape_llama",
    name="Llama profiles start low, plateau, then refine",
    sentence="Llama profiles start low, plateau, then refine",
    role=FINDING,
    unit="prompts",
    dataset="",
    rule=rules.family_shape,
    figure="shape",
)

# Shape claim key (:data:`entropy_lens.verdicts.study.SHAPE_FAMILIES`) -> its claim.
SHAPE_ROWS = {"gpt": SHAPE_GPT, "llama": SHAPE_LLAMA}


def shape_rule(expected: Expected) -> RowRule:
    """A verdict per model of a family with a shape claim (or of its architecture, as an extension)."""

    def scope(rec: Record) -> tuple[str, str] | None:
        model = str(rec["model"])
        return study.shape_scope(
            str(expected.families.get(model, rec.get("family", ""))), expected.architectures.get(model, "")
        )

    def stats(rec: Record) -> dict[str, decision.Interval]:
        return {s: interval(rec, s, f"{s}_low", f"{s}_high") for s in SHAPE_STATISTICS}

    def note(rec: Record) -> str:
        text = "; ".join(f"{s} {i.text(1.0, 3)}" for s, i in stats(rec).items())
        model = str(rec["model"])
        if scope(rec)[1] == EXTENSION:
            architecture, family = expected.architectures.get(model, ""), expected.families.get(model, "")
            text = f"{architecture} architecture, family {family}: " + text
        return f"{text}; start {float(rec['start']):.3f}, final {float(rec['final']):.3f} nats"

    return RowRule(
        claim=lambda rec: SHAPE_ROWS[scope(rec)[0]],
        unit=NATS,
        judge=lambda _, rec: rules.family_shape(
            scope(rec)[0], stats(rec), n_sources=int(rec["n_sources"]), third_layers=int(rec["third_layers"])
        ),
        role=lambda rec: scope(rec)[1],
        note=note,
        keep=lambda rec: scope(rec) is not None,
        has_estimate=False,
        null=lambda rec: _flat_null(scope(rec)[0], stats(rec)),
    )


def _flat_null(claim: str, statistics: Mapping[str, decision.Interval]) -> decision.Null | None:
    """A shape's null is a flat profile, every part at its bar: the excess of the weakest part in its claimed
    direction (the one whose interval comes closest to the bar)."""
    excess = []
    for part in rules.SHAPE_CLAIMS[claim]:
        value = statistics[part.statistic]
        sign = 1.0 if part.above else -1.0
        low, high = sorted((sign * (value.low - part.bar), sign * (value.high - part.bar)))
        excess.append(decision.Interval(sign * (value.estimate - part.bar), low, high))
    finite = [e for e in excess if e.finite]
    if not finite:
        return None
    weakest = min(finite, key=lambda e: e.low)
    return decision.Null(
        "flat profile (weakest part)",
        decision.Interval(0.0, 0.0, 0.0),
        weakest,
        margin=decision.NULL_MARGINS["gap"],
        observed=weakest.estimate,  # the weakest part's excess in its claimed direction, over a bar of 0
    )


# Pair statistic (:mod:`entropy_lens.analysis.families.gaps`) -> its claim, verdict rule, study text and note.
PAIR_CLAIMS = {
    FAMILY_GAP: (CLUSTERING, rules.family_not_size, study.STUDY_FAMILY_CLAIM, "d({small}, {large})"),
    ALIGNMENT_GAP: (
        SIZE_RESOLUTION,
        rules.size_resolution,
        study.STUDY_RESOLUTION_CLAIM,
        "r({small}, {large} at its depths)",
    ),
}


# Fewest families with two sizes (a same-family pair) that can tell family from size (docs/verdicts.md, "Cannot test").
MIN_PAIR_FAMILIES = 2


def pair_design(pairs: pd.DataFrame | None) -> str:
    """Why the same-family pairs cannot test "family, not size" or "size as resolution" whatever their numbers
    (fewer than :data:`MIN_PAIR_FAMILIES` families with two sizes: one pair is one observation), or ``""``."""
    families = sorted(set(pairs["family"].astype(str))) if pairs is not None and not pairs.empty else []
    if len(families) >= MIN_PAIR_FAMILIES:
        return ""
    need = "needs two families with two sizes each"
    if not families:
        return f"no family has two sizes: cannot test 'family, not size'; {need}"
    small_large = pairs[["small", "large"]].drop_duplicates()
    what = "one pair" if len(small_large) == 1 else f"one family ({families[0]}) with two sizes"
    return f"{what}: cannot test 'family, not size'; {need}"


def pair_rows(pairs: pd.DataFrame | None, clustering: pd.DataFrame | None, expected: Expected) -> list[dict]:
    """A row per same-family pair, pair claim and scale (one observation per pair, not per model); one "not run"
    row per claim where the blank set cannot be read, and "cannot test" where the pairs cannot tell family from
    size (:func:`pair_design`)."""
    blank = list(expected.datasets.get("blank", ()))
    scores = _clustering_note(clustering)
    reason = pair_design(pairs)
    rows = []
    for statistic, (claim, judge, sentence, same) in PAIR_CLAIMS.items():
        mine = pairs[pairs["statistic"] == statistic] if pairs is not None else pd.DataFrame()
        if mine.empty:
            shortfall = family_shortfall(expected)
            design = f"{reason} ({pair_shortfall(blank, expected.families)})"
            verdict = decision.not_run(shortfall) if shortfall else decision.cannot_test(design)
            rows.append(row(claim, ", ".join(blank) or "all", NATS, verdict, study=sentence, note=scores))
            continue
        rows += rows_of(mine, _pair_rule(claim, judge, sentence, same, scores, reason))
    return rows


def _scale(rec: Record) -> str:
    return str(rec["measure"]) or NATS_SCALE


def _pair_unit(rec: Record) -> str:
    return LOG_V if _scale(rec) == NORMALIZED else NATS


def _pair_rule(claim: Claim, judge, sentence: str, same: str, scores: str, cannot: str = "") -> RowRule:
    """The rule of a pair claim's rows; ``cannot``: why the design cannot test it (then no row is judged)."""

    def verdict(gap: decision.Interval, rec: Record) -> decision.Verdict:
        if cannot:
            return decision.cannot_test(cannot)
        if rec["statistic"] == FAMILY_GAP and int(rec["n_other"]) == 0:
            return decision.not_run(f"only family {rec['family']} on 'blank': no other family to compare with")
        # the alignment gap compares the pair with itself: no other family to name
        nearest = {"nearest": text(rec["nearest"])} if rec["statistic"] == FAMILY_GAP else {}
        return judge(gap, n_samples=int(rec["n"]), unit=_pair_unit(rec), **nearest)

    def note(rec: Record) -> str:
        unit = _pair_unit(rec)
        if rec["statistic"] == ALIGNMENT_GAP:
            text_ = f"aligned on normalized depth {float(rec['same']):.3f}, on absolute layer "
            text_ += f"{float(rec['nearest_value']):.3f} {unit}"
        else:
            text_ = f"{same.format(**rec)} = {float(rec['same']):.3f} {unit}"
            if text(rec["nearest"]):
                text_ += f"; nearest other family: {rec['nearest']} at {float(rec['nearest_value']):.3f} {unit}"
        return "; ".join(t for t in (text_, scores) if t)

    return RowRule(
        claim=claim,
        unit=_pair_unit,
        judge=verdict,
        study=sentence,
        note=note,
        model=lambda rec: f"{rec['small']}, {rec['large']}",
        measure=_scale,
        null=lambda rec: (
            None
            if cannot
            else decision.fixed_null(
                "no family structure (gap 0)",
                interval(rec, ESTIMATE, LOW, HIGH),
                rules.GAP_THRESHOLD,
                margin=decision.NULL_MARGINS["gap"],
            )
        ),
    )


def _clustering_note(clustering: pd.DataFrame | None) -> str:
    """The clustering scores (ARI, silhouette), descriptive: they carry no interval."""
    if clustering is None or clustering.empty:
        return ""
    by = clustering.set_index("grouping")
    return "; ".join(
        f"{g}: ARI {_score(by.loc[g, 'ari_models'])}, silhouette {_score(by.loc[g, 'silhouette_samples'])}"
        for g in by.index
    )


def _score(value: float) -> str:
    return "n/a" if pd.isna(value) else f"{value:.2f}"


def shapes_from_store(store: xr.Dataset, dataset: str, s: StoreSettings) -> pd.DataFrame:
    """The profiles' shape statistics, with the dataset column of a stacked table."""
    return profile_shapes(store, n_boot=s.n_boot, seed=s.seed).assign(dataset=dataset)


def pairs_from_store(store: xr.Dataset, dataset: str, s: StoreSettings) -> pd.DataFrame | None:
    """The same-family pairs on the blank set: family, not size, and size as resolution (``None`` elsewhere)."""
    if not families_read(store, dataset):
        return None
    return family_pairs(store, grid_points=s.grid_points, n_boot=s.n_boot, seed=s.seed)


CLUSTERING_TABLE = PaperInput(
    "clustering",
    "analysis.families.clustering_scores (read by the family-pair rows)",
    None,
    from_store=f"{LOGIT_LENS_ONLY}: under a fitted lens the pair rows stand without it",
    path="results/tables/family_clustering.csv",
    made=WITH_FAMILIES,
)
PAIRS_TABLE = PaperInput(
    "family_pairs",
    "analysis.families.pairs.family_pairs",
    PAIR_READING,
    lambda b: (
        pair_rows(b.frames["family_pairs"], b.frames["clustering"], b.expected)
        if b.frames["clustering"] is not None or b.frames["family_pairs"] is not None
        else []
    ),
    from_store=pairs_from_store,
    path="results/tables/family_pairs.csv",
    made=WITH_FAMILIES,
    columns=PAIR_COLUMNS,
)
SHAPES_TABLE = PaperInput(
    "shapes",
    "analysis.families.shapes.profile_shapes (a dataset column when stacked)",
    SHAPE_READING,
    lambda b: rows_of(b.frames["shapes"], shape_rule(b.expected)),
    from_store=shapes_from_store,
    path="results/tables/family_shapes.csv",
    columns=SHAPE_COLUMNS,
)

# Each family claim's null is no structure (a gap, or a shape's weakest part, of zero).
ZERO_MEAN = PlantedNull("entropy_lens.verdicts.planted_nulls:planted_zero_mean")
GAP_MARGIN = decision.NULL_MARGINS["gap"]
CLUSTERING_TESTED = TestedClaim(
    CLUSTERING,
    _pair_rule,
    (PAIRS_TABLE, CLUSTERING_TABLE),
    ZERO_MEAN,
    twin=TwinRule(FAMILY_PAIR, statistic=FAMILY_GAP, margin=GAP_MARGIN, dataset="blank"),
)
SIZE_RESOLUTION_TESTED = TestedClaim(
    SIZE_RESOLUTION,
    _pair_rule,
    (PAIRS_TABLE,),
    ZERO_MEAN,
    twin=TwinRule(FAMILY_PAIR, statistic=ALIGNMENT_GAP, margin=GAP_MARGIN, dataset="blank"),
)
SHAPE_GPT_TESTED = TestedClaim(
    SHAPE_GPT,
    shape_rule,
    (SHAPES_TABLE,),
    ZERO_MEAN,
    twin=TwinRule(SHAPE, rules.GPT_SHAPE, margin=GAP_MARGIN, split_is_dataset=True),
)
SHAPE_LLAMA_TESTED = TestedClaim(
    SHAPE_LLAMA,
    shape_rule,
    (SHAPES_TABLE,),
    ZERO_MEAN,
    twin=TwinRule(SHAPE, rules.LLAMA_SHAPE, margin=GAP_MARGIN, split_is_dataset=True),
)
