"""Verdict rules: does a claim of the study hold on these models, given our intervals?

Every claim gets one of :data:`VERDICTS` and a sentence saying why.  The rules are
fixed here, before any result is looked at, and written out in the README:

Separability (task, scrambled control, format, MMLU correctness, family; kNN AUC under
grouped folds with its corrected resampled-t 95% interval)
    * ``inconclusive`` when the row could not be scored, or the study's ``k`` had to be
      capped (too few prompts), or the number of independent sources is below
      :data:`MIN_GROUPS`;
    * ``reproduced`` when the interval lies above both the dummy's interval and 0.5;
    * ``not reproduced`` when the interval's upper end is below
      ``0.5 + MIN_AUC_EFFECT``: even a small separability is ruled out;
    * ``inconclusive`` otherwise: the interval is too wide to decide.

Spearman of Delta H vs Delta nucleus size (prompt-cluster bootstrap 95% interval)
    ``reproduced`` above :data:`SPEARMAN_THRESHOLD` (a strong positive rank
    correlation; the study reports 0.74-0.88), ``not reproduced`` below it, otherwise
    ``inconclusive``.

MMLU accuracy (Wilson 95% interval over questions) against the better of chance and the
majority-letter baseline
    ``reproduced`` above it, ``not reproduced`` when the interval rules out beating it by
    :data:`MIN_ACCURACY_EFFECT`, otherwise ``inconclusive``.

Layer skipping (paired bootstrap 95% interval over questions of accuracy with the
expansion layers skipped minus random / pruning skips)
    ``inconclusive`` when the intact model is not above chance (nothing to lose);
    ``reproduced`` when the difference's interval lies below 0; ``not reproduced`` when
    it rules out a drop of :data:`MIN_SKIP_EFFECT`; otherwise ``inconclusive``.

Rényi invariance
    ``reproduced`` when every Rényi order reaches the Shannon verdict on every
    separability row where Shannon reproduced; ``not reproduced`` when some order is
    ``not reproduced`` there; ``inconclusive`` when Shannon reproduced nothing or an
    order is inconclusive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)

CHANCE_AUC = 0.5
# A separability below 0.5 + this AUC is too small to call the claim reproduced.
MIN_AUC_EFFECT = 0.05
# Fewest independent sources (stories, topics, questions, samples) a separability verdict uses.
MIN_GROUPS = 6
# A "strong positive" rank correlation of Delta H with the nucleus-size change.
SPEARMAN_THRESHOLD = 0.5
# Beating the best constant answer by less than this is not knowing the subject.
MIN_ACCURACY_EFFECT = 0.10
# A drop smaller than this (accuracy, 0-1) from skipping is no collapse.
MIN_SKIP_EFFECT = 0.05


@dataclass(frozen=True)
class Verdict:
    """A verdict and the reason for it."""

    verdict: str
    why: str

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval (``low <= estimate <= high`` when finite)."""

    estimate: float
    low: float
    high: float

    @property
    def finite(self) -> bool:
        return all(math.isfinite(v) for v in (self.estimate, self.low, self.high))

    def text(self, scale: float = 1.0, digits: int = 1) -> str:
        """``"estimate [low, high]"`` scaled (e.g. by 100 for percent)."""
        if not self.finite:
            return "n/a"
        return f"{self.estimate * scale:.{digits}f} [{self.low * scale:.{digits}f}, {self.high * scale:.{digits}f}]"


def _pct(interval: Interval) -> str:
    return interval.text(100.0, 1)


def separability(
    auc: Interval,
    dummy: Interval,
    *,
    k_used: int | None,
    k_study: int,
    n_groups: int,
    skipped: str = "",
) -> Verdict:
    """Verdict on a kNN separability row (AUCs in 0-1; see the module docstring)."""
    if skipped or not auc.finite or not dummy.finite:
        return Verdict(INCONCLUSIVE, f"not scored: {skipped or 'no interval'}")
    if k_used is not None and k_used < k_study:
        return Verdict(INCONCLUSIVE, f"too few prompts for the study's k={k_study} (k capped to {k_used})")
    if n_groups < MIN_GROUPS:
        return Verdict(INCONCLUSIVE, f"only {n_groups} independent sources (need {MIN_GROUPS})")
    bar = max(CHANCE_AUC, dummy.high)
    if auc.low > bar:
        return Verdict(REPRODUCED, f"AUC {_pct(auc)} lies above the dummy {_pct(dummy)} and 50")
    if auc.high < CHANCE_AUC + MIN_AUC_EFFECT:
        return Verdict(NOT_REPRODUCED, f"AUC {_pct(auc)} rules out AUC >= {100 * (CHANCE_AUC + MIN_AUC_EFFECT):.0f}")
    return Verdict(
        INCONCLUSIVE,
        f"AUC {_pct(auc)} overlaps the dummy {_pct(dummy)} or 50 and cannot rule out AUC >= "
        f"{100 * (CHANCE_AUC + MIN_AUC_EFFECT):.0f}",
    )


def answers_at_chance(accuracy: Interval, chance: float, majority_share: float, majority_letter: str) -> Verdict | None:
    """Why MMLU correctness cannot be read from profiles, or ``None`` when it can.

    Correctness is only a label about knowledge when the model beats chance and does not
    answer one letter almost always.
    """
    if majority_share >= LETTER_BIAS_SHARE:
        return Verdict(
            INCONCLUSIVE,
            f"letter bias: '{majority_letter}' answered for {100 * majority_share:.0f}% of prompts, so correctness "
            "is where the gold letter falls",
        )
    if accuracy.finite and accuracy.low <= chance:
        return Verdict(INCONCLUSIVE, f"model at chance: accuracy {_pct(accuracy)} (chance {100 * chance:.0f})")
    return None


# A model answering one letter for at least this share of prompts is letter-biased.
LETTER_BIAS_SHARE = 0.75


def spearman(rho: Interval, *, n_prompts: int) -> Verdict:
    """Verdict on the Spearman correlation of Delta H with the nucleus-size change."""
    if not rho.finite:
        return Verdict(INCONCLUSIVE, "not computed: too few valid layer pairs or prompts")
    if n_prompts < MIN_GROUPS:
        return Verdict(INCONCLUSIVE, f"only {n_prompts} prompts (need {MIN_GROUPS})")
    text = rho.text(1.0, 3)
    if rho.low > SPEARMAN_THRESHOLD:
        return Verdict(REPRODUCED, f"rho {text} lies above {SPEARMAN_THRESHOLD}")
    if rho.high < SPEARMAN_THRESHOLD:
        return Verdict(NOT_REPRODUCED, f"rho {text} lies below {SPEARMAN_THRESHOLD}")
    return Verdict(INCONCLUSIVE, f"rho {text} straddles {SPEARMAN_THRESHOLD}")


def accuracy(acc: Interval, *, chance: float, majority: float) -> Verdict:
    """Verdict on MMLU accuracy against chance and the majority-letter baseline (0-1)."""
    if not acc.finite:
        return Verdict(INCONCLUSIVE, "no scored questions")
    bar = max(chance, majority)
    name = "chance" if chance >= majority else "the majority-letter baseline"
    if acc.low > bar:
        return Verdict(REPRODUCED, f"accuracy {_pct(acc)} lies above {name} ({100 * bar:.1f})")
    if acc.high < bar + MIN_ACCURACY_EFFECT:
        return Verdict(
            NOT_REPRODUCED,
            f"accuracy {_pct(acc)} rules out beating {name} ({100 * bar:.1f}) by {100 * MIN_ACCURACY_EFFECT:.0f}",
        )
    return Verdict(INCONCLUSIVE, f"accuracy {_pct(acc)} overlaps {name} ({100 * bar:.1f})")


def layer_skip(difference: Interval, *, intact: Interval, chance: float, versus: str) -> Verdict:
    """Verdict on accuracy(expansion skipped) - accuracy(``versus`` skipped), paired over questions."""
    if not intact.finite or intact.low <= chance:
        return Verdict(
            INCONCLUSIVE, f"intact model not above chance: accuracy {_pct(intact)} (chance {100 * chance:.0f})"
        )
    if not difference.finite:
        return Verdict(INCONCLUSIVE, "no paired difference")
    text = f"expansion - {versus} {difference.text(100.0, 1)} points"
    if difference.high < 0:
        return Verdict(REPRODUCED, f"{text}: skipping expansion layers hurts more")
    if difference.low > -MIN_SKIP_EFFECT:
        return Verdict(NOT_REPRODUCED, f"{text}: rules out an extra drop of {100 * MIN_SKIP_EFFECT:.0f} points")
    return Verdict(INCONCLUSIVE, f"{text}: the interval includes 0")


def renyi_invariance(shannon: Sequence[str], renyi: Sequence[Sequence[str]]) -> Verdict:
    """Verdict on "Rényi entropy leaves the conclusions intact".

    Args:
        shannon: Shannon verdict of each separability row.
        renyi: For each row, the verdicts of every Rényi order on it.
    """
    held = [orders for base, orders in zip(shannon, renyi, strict=True) if base == REPRODUCED]
    if not held:
        return Verdict(INCONCLUSIVE, "Shannon entropy reproduced no separability claim to compare with")
    flat = [v for orders in held for v in orders]
    if not flat:
        return Verdict(INCONCLUSIVE, "no Rényi order was scored")
    if all(v == REPRODUCED for v in flat):
        return Verdict(REPRODUCED, f"every Rényi order reproduced all {len(held)} rows Shannon reproduced")
    if NOT_REPRODUCED in flat:
        return Verdict(NOT_REPRODUCED, f"{flat.count(NOT_REPRODUCED)} Rényi rows not reproduced where Shannon was")
    return Verdict(INCONCLUSIVE, f"{flat.count(INCONCLUSIVE)} Rényi rows inconclusive where Shannon reproduced")


def not_run(reason: str) -> Verdict:
    """An inconclusive verdict for a claim the configuration did not measure."""
    return Verdict(INCONCLUSIVE, f"not run: {reason}")
