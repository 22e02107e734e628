"""Data as jboost reads it: tabular input, labels, binning, categorical columns, folds.

:mod:`~jboost.data.tabular`, :mod:`~jboost.data.labels`, :mod:`~jboost.data.binning`,
:mod:`~jboost.data.categorical` (column kinds and encodings),
:mod:`~jboost.data.categorical_stats` (CatBoost's ordered target statistics) and
:mod:`~jboost.data.folds`.
"""
