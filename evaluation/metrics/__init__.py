"""Metric primitives: pure functions on numpy arrays, no I/O, no suite conventions.

Suites compose these; each docstring says which reference behaviour the function reproduces.
"""
