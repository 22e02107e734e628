"""Distributional losses (API docstring ~15 lines: what a Distribution is, the six families, pointer to docs/distributions.md); re-exports the L2 names only."""
