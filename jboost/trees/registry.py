"""The built-in tree families by their tree_family= names."""

from __future__ import annotations

from jboost.trees import depthwise as depthwise_lib
from jboost.trees import lossguide
from jboost.trees import oblivious

#: The built-in tree families by their ``tree_family=`` names.
TREE_FAMILIES = {"oblivious": oblivious.ObliviousTrees, "depthwise": depthwise_lib.DepthwiseTrees,
                 "lossguide": lossguide.LossGuidedTrees}
