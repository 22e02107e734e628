"""Distributional losses: a Distribution's negative log-likelihood as a jboost Loss (one raw
output per parameter), after NGBoost (Duan et al. 2020); see ``docs/distributions.md``."""
