"""Gradient flow and function summaries: what callers pass, what a function returns from its
parameters, whether a value is differentiated, the sign of a value across calls."""
