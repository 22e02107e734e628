"""Interpreting fitted ensembles: exact SHAP values, feature importance and partial dependence.

Every model is read as a constant plus a sum of trees (:func:`tree_sum`). Modules:
:mod:`~jboost.inspect.shap`, :mod:`~jboost.inspect.importance`, :mod:`~jboost.inspect.dependence`
and :mod:`~jboost.inspect.covers` (what SHAP and partial dependence share).
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
