"""Distributional losses: a Distribution's negative log-likelihood as a jboost Loss (one raw output per parameter)."""
