"""The fit pipeline behind :func:`jboost.fit`: settings, prepared inputs, continuation.

:mod:`~jboost.fitting.settings` (defaults, limits and domains of the settings),
:mod:`~jboost.fitting.prepare` (labels, offsets, the checked and binned data),
:mod:`~jboost.fitting.tabular` (an ensemble's tabular input), :mod:`~jboost.fitting.init_model`
(checks of a continued fit), :mod:`~jboost.fitting.rounds` (the host round loop: compiled calls of
rounds, Ctrl-C, callbacks, checkpoints) and :mod:`~jboost.fitting.boost` (``jboost.fit`` itself).
"""
