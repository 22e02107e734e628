"""The fit pipeline behind :func:`jboost.fit`: :mod:`~jboost.fitting.settings`,
:mod:`~jboost.fitting.prepare` (the checked and binned data), :mod:`~jboost.fitting.tabular`,
:mod:`~jboost.fitting.init_model` (a continued fit's checks), :mod:`~jboost.fitting.rounds` (the
host round loop) and :mod:`~jboost.fitting.boost` (``jboost.fit``). See docs/fitting.md.
"""
