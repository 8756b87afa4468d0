"""The units of the paper table's ``unit`` column, and how a number in each is shown.

Row rules (:mod:`entropy_lens.verdicts.claims`) name a row's unit; :mod:`entropy_lens.verdicts.render`
scales and rounds by it.  Fractions are stored 0-1 and shown in percent where the unit says so.
"""

from __future__ import annotations

PERCENT = 100.0
AUC, RHO, ACC, POINTS, CONTAINMENT, JACCARD, NATS = (
    "AUC %",
    "rho",
    "accuracy %",
    "accuracy points",
    "containment",
    "Jaccard",
    "nats",
)
LOGPROB, SHARE, AUC_POINTS, LOG_V = "nats (log p gold)", "share %", "AUC points", "fraction of log V"
# Units shown in percent (the stored number times this scale); the rest as stored.
SCALES = {AUC: PERCENT, ACC: PERCENT, POINTS: PERCENT, SHARE: PERCENT, AUC_POINTS: PERCENT}
# Units shown at three decimals; the rest at one.
THREE_DIGITS = (RHO, CONTAINMENT, JACCARD, NATS, LOGPROB, LOG_V)
