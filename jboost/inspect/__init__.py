"""Interpreting fitted ensembles, each read as a constant plus a sum of trees (:func:`tree_sum`):
exact SHAP values, feature importance and partial dependence. See docs/inspect.md.
"""

from jboost.inspect.covers import leaf_covers
from jboost.inspect.covers import subset_values
from jboost.inspect.covers import walk_values
from jboost.inspect.dependence import PartialDependence
from jboost.inspect.dependence import partial_dependence
from jboost.inspect.importance import IMPORTANCE_KINDS
from jboost.inspect.importance import importance
from jboost.inspect.importance import permutation_importance
from jboost.inspect.shap import MAX_TABLE_DEPTH
from jboost.inspect.shap import ShapValues
from jboost.inspect.shap import explain_trees
from jboost.inspect.shap import interaction_weights
from jboost.inspect.shap import shap_interaction_values
from jboost.inspect.shap import shap_values
from jboost.inspect.shap import shapley_weights
from jboost.models.sums import tree_sum
