"""Fitted models: the model protocol and every model type.

:mod:`~jboost.models.base` (the protocol, ``predict`` and its kin), :mod:`~jboost.models.booster`,
:mod:`~jboost.models.forest`, :mod:`~jboost.models.bagged`, :mod:`~jboost.models.ecoc`,
:mod:`~jboost.models.stacked`, :mod:`~jboost.models.ensemble` (what ensembles share),
:mod:`~jboost.models.sums` (every model as a sum of trees), :mod:`~jboost.models.metadata` and
:mod:`~jboost.models.distributional`.
"""
