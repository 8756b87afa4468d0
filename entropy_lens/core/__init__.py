"""The foundation every layer may use; it imports nothing else from the package.

Modules:
    checks     argument checks several layers share: one message for one mistake.
    intervals  Wilson and bootstrap intervals (answers' accuracy, analyses' correlations).
    frames     the standard frame every analysis hands the paper table, and how a table reads as one.
"""
