"""The boosting engine: the step and its scan, batching and memory.

:mod:`~jboost.engine.state` (the arrays a fit carries), :mod:`~jboost.engine.algorithm` (the
round protocol and the Newton round), :mod:`~jboost.engine.boosting` (``init`` / ``step`` /
``boost``), :mod:`~jboost.engine.calls` (one compiled program of rounds for host-side calls),
:mod:`~jboost.engine.sharded` (rows sharded over devices), :mod:`~jboost.engine.samplers`,
:mod:`~jboost.engine.batching`, :mod:`~jboost.engine.checkpoints`, :mod:`~jboost.engine.memory`
and :mod:`~jboost.engine.distributed` (rows spread over processes).
"""
