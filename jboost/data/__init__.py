"""Data as jboost reads it: tabular input, labels, binning, categorical columns (kinds,
encodings, CatBoost's ordered target statistics), folds. See ``docs/data.md`` and
``docs/categorical.md``.
"""
