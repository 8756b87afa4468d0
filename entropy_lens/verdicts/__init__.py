"""Verdicts: each claim of the study judged from the analyses' tables, against the study and its null.

Modules:
    claim           a claim's record (id, name, role, scope, unit, rule function, figure, headline) and its roles.
    study           the study's figures and sentences (data/study.yaml), the models it names, its claims' scopes.
    decision        the one three-way test of an interval against its bars (Test, judge, decide), the units that
                    would decide it, and the excess over a null (beyond_null).
    rules           the named rules that turn an estimate and its interval into reproduced / not reproduced /
                    inconclusive: short wrappers of decision, one per statistic.
    outcomes        layer skipping: three outcomes per comparison, and the study's direction where it names one.
    skip_nulls      planted nulls of the layer-skip comparisons.
    schedule_nulls  planted null of the schedule under a fitted lens (two lenses' ΔH unrelated across blocks).
    units           the table's units and how a number in each is shown.
    rows            the table's row: its columns, the one builder (rows_of) that turns a standard frame
                    (entropy_lens.core.frames) into rows under a claim's RowRule, and what the config expected.
    inputs          a paper-table input: its reading, the rows it gives, how a fitted lens recomputes it.
    claims/         each topic's claims, one module each: records, row rules and inputs. separability (kNN,
                    held-out family), baselines, renyi, expansion (Spearman, overlap), accuracy (the MMLU
                    precondition), skipping (layer-skip comparisons and rank), drop_sets (pruning criteria),
                    families (shapes, same-family pairs), schedule (the expansion/pruning schedule under a fitted
                    lens).
    registry        every claim's record in reading order, and the topics in the order their inputs are read.
    absences        the "not run" rows of claims the configuration did not measure.
    table           the study-vs-ours comparison table: every claim, our interval, the study's figure, a verdict.
    claim_verdicts  one verdict per claim from its rows (the headline counts claims, not rows).
    nulls           the null-calibration table: per claim, its null, observed and null values, planted-null rates.
    robustness      whether the verdicts survive a lens fitted to the model.
    twins           beyond the twin: each learned-structure row's twin reading (readings.TWIN's columns) from the
                    twin table, and the claims a random network already shows.
    render          the table for readers: intervals as text, counts by role, Markdown, HTML, the terminal.

This layer sits above ``entropy_lens.analysis`` (the science); ``analysis`` imports nothing from it.
"""
