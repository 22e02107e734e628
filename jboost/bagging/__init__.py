"""Bagging (Breiman 1996; ESL 8.7) and random forests (Breiman 2001; ESL Algorithm 15.1) of
oblivious or depth-wise trees, bagged boosters, and out-of-bag estimates (ESL 15.3.1).

Modules: ``bootstrap`` (bootstrap weights, bag keys, feature subsets), ``forest``
(:func:`fit_forest`), ``boosters`` (:func:`fit_bagged_boosters`), ``oob``. See docs/ensembles.md."""

from jboost.engine.memory import chunk_size_for_budget, forest_chunk_size
from jboost.engine.batching import map_in_chunks
from jboost.models.bagged import BaggedBoosters
from jboost.bagging.boosters_binned import bag_boost_binned
from jboost.bagging.oob import bagged_oob
from jboost.models.bagged import bagged_outputs, bagged_predict, bagged_predict_proba
from jboost.bagging.boosters import fit_bagged_boosters
from jboost.bagging.bootstrap import (BOOTSTRAPS, all_bootstrap_weights, bag_keys,
                                      bootstrap_weights, feature_subsets, node_feature_subsets,
                                      resolve_max_features, subsets_to_masks)
from jboost.bagging.forest import FOREST_TASKS, TREE_FAMILIES
from jboost.models.forest import Forest
from jboost.bagging.forest_binned import ForestConfig, ForestHyperparams
from jboost.bagging.forest import fit_bagged_trees, fit_forest
from jboost.bagging.forest_binned import fit_forest_binned
from jboost.models.forest import (forest_predict, forest_predict_class, forest_vote, tree_family_of,
                                  tree_outputs)
from jboost.bagging.forest_binned import tree_targets
from jboost.bagging.oob import OOBResult, forest_oob, forest_staged, oob_from_outputs, oob_scan

__all__ = [
    "BOOTSTRAPS", "BaggedBoosters", "FOREST_TASKS", "Forest", "ForestConfig", "ForestHyperparams",
    "OOBResult", "all_bootstrap_weights", "bag_boost_binned", "bag_keys", "bagged_oob",
    "bagged_outputs", "bagged_predict", "bagged_predict_proba", "bootstrap_weights",
    "chunk_size_for_budget", "feature_subsets", "forest_chunk_size", "fit_bagged_boosters", "fit_bagged_trees",
    "fit_forest", "fit_forest_binned", "forest_oob", "forest_predict", "forest_predict_class",
    "forest_staged", "forest_vote", "map_in_chunks", "oob_from_outputs", "oob_scan",
    "node_feature_subsets", "resolve_max_features", "subsets_to_masks", "TREE_FAMILIES",
    "tree_family_of", "tree_outputs", "tree_targets",
]

