"""Expansion and pruning: how entropy changes track the top-p nucleus across layers.

``spearman`` (Delta H against the nucleus-size change), ``overlap`` (adjacent-layer containment and
Jaccard), their cross-prompt ``nulls`` and the ``planted`` data that calibrate them.  Import each module
by its full path; this file re-exports nothing.
"""
