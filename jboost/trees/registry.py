"""The built-in tree families by their tree_family= names."""

from __future__ import annotations

from jboost.trees import depthwise as depthwise_lib, lossguide, oblivious

#: The built-in tree families by their ``tree_family=`` names.
TREE_FAMILIES = {"oblivious": oblivious.ObliviousTrees, "depthwise": depthwise_lib.DepthwiseTrees,
                 "lossguide": lossguide.LossGuidedTrees}
