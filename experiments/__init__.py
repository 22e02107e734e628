"""Reproductions of published boosting results: one config per experiment, one runner.

Run ``python -m experiments.run <name> [--smoke]``; see ``experiments/README.md``.
"""
