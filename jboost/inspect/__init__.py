"""Interpreting fitted ensembles, each read as a constant plus a sum of trees (:func:`tree_sum`):
exact SHAP values, feature importance and partial dependence. See docs/inspect.md.
"""

from jboost.inspect.covers import leaf_covers, subset_values, walk_values
from jboost.inspect.dependence import PartialDependence, partial_dependence
from jboost.inspect.importance import IMPORTANCE_KINDS, importance, permutation_importance
from jboost.inspect.shap import (MAX_TABLE_DEPTH, ShapValues, explain_trees, interaction_weights,
                                 shap_interaction_values, shap_values, shapley_weights)
from jboost.models.sums import tree_sum
