"""Checks of init_model= against a continued fit: model type, features, bins, depth, tree family, loss."""

from __future__ import annotations

from typing import Optional

import numpy as np

from jboost.engine import boosting as boosting_lib
from jboost.models import booster as booster_lib
from jboost.trees import depthwise as depthwise_lib, registry


def check_init_model(model, booster_type: type, n_features: int, borders, *, n_bins: int,
                     depth: int, who: str = "jboost.fit",
                     config: Optional[boosting_lib.BoostConfig] = None):
    """Check a model to continue (``init_model=``) against a new fit of ``who``: one
    ``booster_type`` on as many features, with the same ``n_bins``, ``depth``, borders and
    (given ``config``) tree family. Returns the borders to bin with (the model's)."""
    if not isinstance(model, booster_type):
        raise TypeError(f"init_model must be a {booster_type.__name__} fitted by {who}; got {type(model).__name__}.")
    if model.batch_shape:
        raise ValueError(f"init_model is a batch of {model.batch_shape} models (jax.vmap): "
                         "continue one model.")
    if model.n_features != n_features:
        raise ValueError(f"init_model has {model.n_features} features; X has {n_features}.")
    model_bins = model.borders.shape[-1] + 1
    if n_bins != model_bins:
        raise ValueError(f"n_bins={n_bins} differs from init_model's ({model_bins}): a continued "
                         f"fit bins with the model's borders; pass n_bins={model_bins}.")
    if depth != model.depth:
        raise ValueError(f"depth={depth} differs from init_model's trees (depth {model.depth}); "
                         f"pass depth={model.depth}.")
    if borders is not None and not np.array_equal(np.asarray(borders), np.asarray(model.borders)):
        raise ValueError("borders differ from init_model's: a continued fit bins with the model's "
                         "borders (omit borders=).")
    trees = model.trees
    if hasattr(trees, "thresholds") and not np.array_equal(
            np.asarray(trees.borders),
            np.asarray(model.borders)[np.asarray(trees.features), np.asarray(trees.thresholds)]):
        raise ValueError("init_model's split thresholds are not on its bin borders (a model "
                         "fine-tuned with jboost.finetune(soft=True) moved them): a continued fit "
                         "replays the trees on bins and would change its predictions; continue the "
                         "model before soft fine-tuning, or fine-tune with soft=False.")
    if config is not None:
        check_init_family(model, config)
    return model.borders


#: The ``tree_family=`` name of each built-in family class.
_FAMILY_ARGS = {cls.__name__: name for name, cls in registry.TREE_FAMILIES.items()}


def check_init_family(model, config: boosting_lib.BoostConfig) -> None:
    """A continued fit grows the model's tree family (the one its settings name, else the one
    its trees show) with tables of as many node slots."""
    want = config.tree_family.__name__
    trees = model.trees
    tables = isinstance(trees, depthwise_lib.DepthwiseTrees)
    slots = int(trees.features.shape[-1]) if tables else None
    grown = (getattr(getattr(model, "settings", None), "names", None) or {}).get("tree_family")
    if grown is None:  # no record (an algorithm's model, an older file): what the trees show
        grown = (("DepthwiseTrees" if slots == 2 ** model.depth - 1 else "LossGuidedTrees")
                 if tables else type(trees).__name__)
    if grown != want:
        arg = _FAMILY_ARGS.get(grown)
        hint = f"tree_family={arg!r}" if arg else f"tree_family={grown}"
        if grown == "LossGuidedTrees":
            hint += f", max_leaves={slots + 1}"
        raise ValueError(f"init_model's trees are {grown}; this fit's tree_family is {want}: a "
                         f"continued fit grows the model's family (pass {hint}).")
    if config.max_leaves is not None and slots != config.max_leaves - 1:
        raise ValueError(f"max_leaves={config.max_leaves} differs from init_model's trees "
                         f"({slots + 1} leaf slots); pass max_leaves={slots + 1}.")


def check_init_loss(model, loss) -> None:
    """A continued fit's loss must be its model's (name and number of outputs)."""
    if model.loss.name != loss.name or model.n_outputs != loss.n_outputs:
        raise ValueError(f"init_model was fitted with loss {model.loss.name!r} ({model.n_outputs} "
                         f"outputs); this fit has {loss.name!r} ({loss.n_outputs}).")
    if model.loss.label_columns != loss.label_columns:
        cols = lambda c: "1-D labels" if c is None else f"{c} label columns"
        raise ValueError(f"init_model was fitted on {cols(model.loss.label_columns)}; this fit's y "
                         f"has {cols(loss.label_columns)}: continue with labels of the same shape.")


def continued_loss(model_loss, loss):
    """The loss a continued fit starts from: the model's, with a batch objective's static
    ``max_group`` taken from this fit's labels."""
    return model_loss.replace(max_group=loss.max_group) if loss.batch else model_loss


def init_model_borders(model, X, loss, borders, config):
    """Check ``init_model`` against the new fit (``X``: its rows, or its number of features);
    returns the borders to bin with (the model's)."""
    if isinstance(model, booster_lib.Booster) and model.info:
        raise TypeError("init_model must be a Booster from jboost.fit (gradient boosting); this "
                        "one has an algorithm's state: continue it with its algorithm "
                        "(jboost.algorithms.<name>(..., init_model=model)).")
    borders = check_init_model(model, booster_lib.Booster,
                                           X if isinstance(X, int) else X.shape[1], borders,
                                           n_bins=config.n_bins, depth=config.depth,
                                           config=config)
    check_init_loss(model, loss)
    return borders
