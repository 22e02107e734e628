"""Trees: the tree-family protocol (:mod:`~jboost.trees.family`), the families
(:mod:`~jboost.trees.oblivious`, :mod:`~jboost.trees.depthwise`, :mod:`~jboost.trees.lossguide`)
and what they share: routing, histograms, split criteria and leaf refits. See docs/trees.md.
"""
