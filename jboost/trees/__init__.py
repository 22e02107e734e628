"""Trees: the tree-family protocol and the families, and the histograms and splits they share.

:mod:`~jboost.trees.family` (the protocol and prediction), :mod:`~jboost.trees.oblivious`,
:mod:`~jboost.trees.depthwise` (with :mod:`~jboost.trees.depthwise_levels`,
:mod:`~jboost.trees.node_table` and :mod:`~jboost.trees.node_splits`), :mod:`~jboost.trees.lossguide`,
:mod:`~jboost.trees.routing` (the one rule that sends a row left or right),
:mod:`~jboost.trees.histograms`, :mod:`~jboost.trees.splits` (the split criterion),
:mod:`~jboost.trees.refit` (exact leaf values) and :mod:`~jboost.trees.registry` (the built-in
families by name).
"""
