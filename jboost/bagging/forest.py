"""fit_forest / fit_bagged_trees: random forests (ESL Algorithm 15.1; Breiman 2001) and bagged
trees of depth-wise or oblivious trees, fitted in checkpointed chunks of bags.

See docs/ensembles.md."""

from __future__ import annotations

import functools
import inspect
import types
from typing import Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

from jboost import _native, checks, devices as devices_lib
from jboost.bagging import bootstrap as bootstrap_lib, forest_binned, forest_sharded
from jboost.data import labels as labels_lib, tabular as tabular_lib
from jboost.engine import batching, memory
from jboost.fitting import (init_model as init_model_lib, prepare, rounds, settings as settings_lib,
                            tabular)
from jboost.losses import loss
from jboost.models import forest as forest_lib
from jboost.trees import family, node_table

#: Forest tasks: ``"classification"`` is binary or multiclass, K from the labels.
FOREST_TASKS = ("regression",) + loss.CLASSIFICATION + ("classification",)
# The loss whose task maps a forest's class labels (jboost.fitting.prepare.class_labels): two
# classes at most for "binary", any number otherwise.
_LABEL_LOSS = {"binary": "binomial_deviance", "multiclass": "multinomial_deviance",
               "classification": "multinomial_deviance"}


CHECKPOINT_KIND = "forest"


def _fit_forest_checkpointed(X_binned, y, w, key, hyper: forest_binned.ForestHyperparams, first_tree: int = 0, *,
                            config: forest_binned.ForestConfig, checkpoint_dir, borders=None, callbacks=(),
                            sharded: Optional["forest_sharded.ShardedRows"] = None):
    """:func:`fit_forest_binned` with its chunks of bags run from the host
    (:func:`jboost.engine.batching.map_checkpointed`: checkpoints, callbacks, Ctrl-C keeps the
    chunks finished); ``sharded``: the rows sharded over a mesh, replacing ``X_binned, y, w``."""
    quiet = config._replace(verbose=False)
    chunk_config = quiet._replace(n_trees=quiet.chunk_size)
    if sharded is None:
        chunk_fn = functools.partial(forest_binned.forest_chunk_from, first=int(first_tree), config=chunk_config)
    else:
        X_binned, y, w = sharded.arrays
        chunk_fn = functools.partial(forest_sharded.sharded_chunk_from, first=int(first_tree), sharded=sharded,
                                     program=forest_sharded.sharded_program(sharded.mesh, chunk_config,
                                                              sharded.n_total, sharded.row_starts))
    first_process = sharded is None or sharded.local is None or sharded.local.is_first

    def info(c, chunk):
        size = chunk[1].shape[0]
        return {"trees": [first_tree + b for b in range(c * size, (c + 1) * size) if b < config.n_trees]}

    trees, counts = batching.map_checkpointed(
        # The chunk program does not depend on the number of trees: one compilation for every
        # forest size (and warm start) with the same chunk size and settings.
        chunk_fn, (X_binned, y, w, key, hyper, borders), config.n_trees,
        config.chunk_size, checkpoint_dir=checkpoint_dir, kind=CHECKPOINT_KIND,
        settings=(quiet, int(first_tree), _native.available(), jax.devices()[0].platform)
        + (() if sharded is None else (sharded.row_starts,)),
        differs="data, key, hyperparameters or settings", what="chunks of trees",
        progress="forest: trees" if config.verbose and first_process else None,
        callbacks=callbacks, info=info,
        at_once=True, keep_on_interrupt=True, unit="trees",
        **(_depthwise_chunks(config) if config.tree_family == "depthwise" else {}))
    if config.tree_family == "depthwise":  # two-class leaves expanded per chunk (_depthwise_chunks)
        return trees, counts
    return forest_binned.two_class_leaves(trees, config), counts


def _depthwise_chunks(config: forest_binned.ForestConfig) -> dict:
    """Each chunk of depth-wise trees kept with its two-class leaves expanded and cut to the node
    slots it uses; the chunks then padded to the largest use and joined on the host."""

    def combine(outs, n_done):  # on the host, then one device array each
        cap = max(t.features.shape[-1] for t, _ in outs)
        outs = [(node_table.pad_nodes(t, cap, config.n_bins), c) for t, c in outs]
        joined = jax.tree_util.tree_map(lambda *xs: np.concatenate(xs)[:n_done], *outs)
        return jax.tree_util.tree_map(jax.device_put, joined)

    def keep(out):
        trees, counts = out
        host = jax.tree_util.tree_map(np.asarray, trees)  # expanded on the host: no program compiled
        return node_table.trim_nodes(forest_binned.two_class_leaves(host, config, np), host=True), np.array(counts)

    return dict(keep=keep, combine=combine)


@settings_lib.takes_settings(task="classification", depth=None, l2=0.0, verbose=False, tree_family=None)
def fit_forest(X, y, *, task, n_trees: int = 100, depth,
               max_features: Union[None, str, int, float] = "sqrt", min_child_weight,
               min_split_gain, l2, n_bins, bootstrap: str = "multinomial",
               n_classes: Optional[int] = None, sample_weight, key,
               chunk_size: Optional[int] = None, memory_budget: Optional[int] = None, borders,
               verbose, checkpoint_dir, init_model, callbacks, tree_family,
               max_nodes: Optional[int] = None, devices, rows,
               interaction_constraints, monotone_constraints) -> forest_lib.Forest:
    """Random forest of oblivious or depth-wise trees (ESL Algorithm 15.1; Breiman 2001); bagged
    trees with ``max_features=None``.

    The defaults are a forest's, not :func:`jboost.fit`'s: depth-wise trees grown until their
    nodes are pure or too small, unpenalised (``l2=0``). See docs/ensembles.md (random forests).

    Args:
      X: ``(n, F)`` floats (NaN: missing) or a pandas DataFrame, as :func:`jboost.fit`.
      y: ``(n,)`` real targets or class labels (any labels, mapped as :func:`jboost.fit` maps them).
      task: ``"classification"`` (binary or multiclass, K from the labels or ``n_classes``; leaves
        hold class frequencies), ``"binary"``, ``"multiclass"`` or ``"regression"`` (means).
      n_trees: number of bootstrap trees ``B`` (static).
      depth: levels per tree (static): 1..16 oblivious, 1..30 depth-wise. Default ``None``: 30
        depth-wise, 10 oblivious, ``init_model``'s when continuing.
      max_features: features eligible per node (per level for oblivious trees; static): ``None``
        (all: bagging), ``"sqrt"``, ``"third"``, ``"log2"``, an int or a fraction.
      min_child_weight: minimal bootstrap-weighted number of rows in each child (traced).
      bootstrap: ``"multinomial"``, ``"poisson"`` or ``"bayesian"``
        (:func:`~jboost.bagging.bootstrap_weights`).
      n_classes: the number of classes K for classification (default ``max(y) + 1``).
      chunk_size: bags fitted together; default from the memory estimate
        (:func:`jboost.engine.memory.forest_chunk_size`) within ``memory_budget``.
      memory_budget: bytes for the bags fitted together (default: the device's).
      verbose: print a line as each chunk of trees is fitted.
      checkpoint_dir: save each chunk of trees as it finishes; a rerun resumes bitwise.
      callbacks: functions called after each chunk of trees with a dict; ``True`` stops the fit.
      tree_family: ``"depthwise"`` (default; each node its own ``m`` random features) or
        ``"oblivious"`` (``m`` features per level); ``init_model``'s when continuing (static).
      max_nodes: depth-wise trees only (static): histogram slots per level, default ``n // 2``
        (exact trees); a smaller value caps a level's work.
      init_model: a :class:`Forest` to continue by ``n_trees`` more trees, bitwise the longer fit.
      devices: rows sharded over these devices (``"all"``, a list or a ``Mesh``), histograms
        summed with ``psum``: the one-device trees.

    Returns:
      A :class:`Forest`.

    Raises:
      MemoryError: the forest would not fit in the device's memory
        (:func:`jboost.engine.memory.forest_bytes`, checked before compiling).
    """
    # The fit's state: the call's arguments, replaced by their checked values step by step.
    s = types.SimpleNamespace(**locals())
    _check_forest_settings(s)
    _read_forest_table(s)
    data = _bin_forest(s)
    config = _forest_config(s, data)
    trees, counts = _grow_forest(s, data, config)
    return _finish_forest(s, data, trees, counts)


def _check_forest_settings(s) -> None:
    """The settings of :func:`fit_forest`, checked; with ``rows="local"``, the processes'
    settings compared and their rows gathered (``s.local``; ``s.y`` the whole table's)."""
    s.task = checks.check_choice(s.task, "task", FOREST_TASKS)
    s.bootstrap = checks.check_choice(s.bootstrap, "bootstrap", bootstrap_lib.BOOTSTRAPS)
    s.n_trees = checks.check_int(s.n_trees, "n_trees", 1, 10**6)
    s.tree_family, s.depth = _forest_family_and_depth(s.tree_family, s.depth, s.init_model)
    s.memory_budget = devices_lib.check_memory_budget(s.memory_budget)
    s.hyper = forest_binned.ForestHyperparams.create(s.min_child_weight, s.min_split_gain, s.l2)
    s.first_tree, s.local = 0, None
    if settings_lib.check_setting("rows", s.rows) == "local":
        s.local = forest_sharded.local_rows(s.X, s.y, s.sample_weight, s.devices, dict(
            {k: getattr(s, k) for k in _LOCAL_SETTINGS}, verbose=bool(s.verbose),
            tree_family=s.tree_family, max_nodes=s.max_nodes,
            names=tabular_lib.feature_names_of(s.X)), init_model=s.init_model is not None,
            checkpoint_dir=s.checkpoint_dir is not None, callbacks=bool(s.callbacks))
        s.devices = s.local.mesh
        s.y = s.local.y  # the whole table's labels: classes and K are those of the concatenation
    s.mesh = devices_lib.mesh_of(s.devices)
    if s.mesh is not None and not rounds.host_fit(s.hyper, s.key):
        raise ValueError("devices= and rows='local' need a concrete fit (not under jax.vmap or "
                         "jax.jit): fit a vmapped forest on one device (devices=None).")


# The settings every process of a rows="local" forest compares (before any collective).
_LOCAL_SETTINGS = ("task", "n_trees", "depth", "max_features", "min_child_weight",
                   "min_split_gain", "l2", "n_bins", "bootstrap", "n_classes", "key", "chunk_size",
                   "memory_budget", "borders", "interaction_constraints", "monotone_constraints")


def _read_forest_table(s) -> None:
    """The table (``s.tab``: a DataFrame's names, class labels mapped), a continued forest's
    borders and classes checked against it."""
    # Categorical columns are refused, naming the fix (docs/ensembles.md).
    s.tab = tabular.tabular(s.X, s.y, init_model=s.init_model, loss=_LABEL_LOSS.get(s.task),
                            classify=s.task != "regression", who="jboost.bagging.fit_forest",
                            n_rows=None if s.local is None else s.local.n_total)
    s.X, s.y = s.tab.X, s.tab.y
    if s.init_model is not None:
        s.borders, s.n_classes = _check_init_forest(s.init_model, s.X, s.task, s.n_classes,
                                                    s.borders, s.n_bins, s.depth, s.tree_family)
        s.first_tree = s.init_model.n_trees
    classes = s.tab.classes
    if classes is not None and s.n_classes is not None and int(s.n_classes) != len(classes):
        raise ValueError(f"n_classes={s.n_classes} but y holds {len(classes)} classes "
                         f"{list(classes.labels)[:10]} (labels mapped to 0..K-1 in sorted order): "
                         "omit n_classes.")


def _bin_forest(s) -> prepare.Data:
    """The checked and binned rows (this process's with ``rows="local"``, after every process
    checked the whole table's labels and weights alike); sets ``s.y_all``, ``s.w_all``,
    ``s.n`` (the whole table's rows), ``s.k`` (the outputs) and ``s.n_bins``."""
    found = []  # K found by the label check

    def label_check(labels, name):
        if s.task != "regression" and name == "y":
            found.append(labels_lib.n_classes_of(labels, s.n_classes, name,
                                                 "binary" if s.task == "binary" else "multiclass"))

    local = s.local
    if local is None:
        data = prepare.prepare(s.X, s.y, sample_weight=s.sample_weight, n_bins=s.n_bins,
                               borders=s.borders, label_check=label_check, weighted_borders=False)
        s.y_all, s.w_all = data.y, data.w
    else:  # every process checks the whole table's labels and weights alike, then bins its rows
        s.y_all = labels_lib.as_labels(s.y, local.n_total)
        label_check(s.y_all, "y")
        s.w_all = tabular_lib.as_weights(local.sample_weight, local.n_total)
        if s.borders is None:  # unweighted, as a one-process forest's
            s.borders = local.borders(s.X, None, settings_lib.check_setting("n_bins", s.n_bins))
        data = local.run_everywhere(prepare.prepare, s.X, local.mine(s.y_all),
                                    sample_weight=local.mine(s.w_all), n_bins=s.n_bins,
                                    borders=s.borders, weighted_borders=False)
    s.n = int(s.y_all.shape[0])  # the whole table's rows
    s.n_bins = data.borders.shape[1] + 1
    s.k = found[0] if found else 1
    s.k_from_labels = bool(found) and s.n_classes is None and s.k > 2  # K = max(y) + 1
    if s.init_model is not None and s.init_model.bag_weights.shape[-1] != s.n:
        raise ValueError(f"init_model was fitted on {s.init_model.bag_weights.shape[-1]} rows (its "
                         f"bootstrap weights); X has {s.n}: continue a forest on the rows it was "
                         "fitted on.")
    return data


def _forest_config(s, data: prepare.Data) -> forest_binned.ForestConfig:
    """The static :class:`ForestConfig`: features per level, node slots, the chunk of trees
    fitted together (default: as many as ``memory_budget`` holds), after the memory check."""
    n, k, depth, n_bins, n_trees, mesh = s.n, s.k, s.depth, s.n_bins, s.n_trees, s.mesh
    n_features = data.X_binned.shape[0]
    m = bootstrap_lib.resolve_max_features(s.max_features, n_features)
    signs, interactions = settings_lib.forest_constraints(
        s.monotone_constraints, s.interaction_constraints, n_features=n_features,
        names=tabular_lib.feature_names_of(s.X), task=s.task, n_outputs=k,
        continuing=s.init_model is not None)
    max_nodes = s.max_nodes
    if s.tree_family == "depthwise":
        max_nodes = max(1, n // 2) if max_nodes is None else checks.check_int(
            max_nodes, "max_nodes", 1, 1 << 30)
    elif max_nodes is not None:
        raise ValueError("max_nodes applies to depth-wise trees: pass tree_family=\"depthwise\" or "
                         "omit max_nodes.")
    if mesh is not None and s.tree_family == "depthwise":
        max_nodes = min(max_nodes, max(1, n // 2))  # the unsharded bound (padding rows add none)
    # Rows of each device (sharded: the table's rows over the devices, padded to a multiple).
    n_dev = n if mesh is None else -(-n // mesh.shape[mesh.axis_names[0]])
    kernel = (mesh is None and s.tree_family == "depthwise" and interactions is None
              and signs is None and forest_binned.kernel_grows(data.X_binned, n_bins))
    chunk_size = s.chunk_size
    if chunk_size is None and kernel:
        chunk_size = forest_binned.kernel_chunk_size(depth, k, n, n_trees, s.memory_budget,
                                                     max_nodes)
    elif chunk_size is None:
        chunk_size = memory.forest_chunk_size(m, n_features, depth, n_bins, k, n_dev, n_trees,
                                              s.memory_budget)
    chunk_size = min(checks.check_int(chunk_size, "chunk_size", 1, 10**6), n_trees)
    check_memory = (devices_lib.check_memory if s.local is None
                    else s.local.everywhere(devices_lib.check_memory, MemoryError))
    from_labels = s.k_from_labels
    check_memory(
        memory.forest_bytes(m, n_features, depth, n_bins, k, n_dev, n_trees, chunk_size,
                            tree_family=s.tree_family,
                            n_nodes=(node_table.node_capacity(depth, n, max_nodes)
                                     if s.tree_family == "depthwise" else None),
                            max_nodes=max_nodes, kernel=kernel, table_rows=n)
        + (0 if mesh is None else n_trees * (n - n_dev) * 4),  # the whole table's bag weights
        devices=s.devices,
        cause=f"K = max(y) + 1 = {k} classes, from the labels' maximum" if from_labels else None,
        detail=f"estimated for {n_trees} trees, {chunk_size} fitted together, on {n} rows, "
        f"{n_features} features ({m} per level), depth={depth}, n_bins={n_bins}, K={k} (each "
        f"tree's histograms 2^(depth-1) x n_bins x 2K float32 per feature, its leaf values "
        f"2^depth x K); use a smaller depth, n_bins or chunk_size"
        f"{', or map the labels to 0..K-1' if from_labels else ''}")
    return forest_binned.ForestConfig(n_trees=n_trees, depth=depth, n_bins=n_bins, n_outputs=k,
                                      max_features=m, bootstrap=s.bootstrap, chunk_size=chunk_size,
                                      verbose=bool(s.verbose), tree_family=s.tree_family,
                                      max_nodes=max_nodes, interactions=interactions,
                                      monotone=signs)


def _grow_forest(s, data: prepare.Data, config: forest_binned.ForestConfig):
    """The engine step of :func:`fit_forest`: ``(trees, bootstrap counts)``, sharded over a
    mesh, one traced program under the caller's ``jax.vmap`` / ``jit``, or chunks of trees from
    the host (checkpoints, callbacks; Ctrl-C keeps the trees so far)."""
    # Targets so large that a split gain G^2 / H overflows float32 are fitted divided by 2^e,
    # exactly: the same splits (gains and min_split_gain scaled by 2^-2e), leaves scaled back.
    e = (labels_lib.gain_exponent(jnp.asarray(s.y_all), jnp.asarray(s.w_all))
         if s.task == "regression" else 0)
    y_fit = data.y if e == 0 else data.y * jnp.float32(2.0 ** -e)
    if e:
        s.hyper = s.hyper._replace(
            min_split_gain=s.hyper.min_split_gain * jnp.float32(2.0 ** (-2 * e)))
    args = (data.X_binned, y_fit, data.w, checks.as_key(s.key), s.hyper)
    host = dict(config=config, checkpoint_dir=s.checkpoint_dir, borders=data.borders,
                callbacks=s.callbacks)
    if s.mesh is not None:  # rows sharded over the mesh's first axis (one process, or several)
        trees, counts = _fit_forest_checkpointed(
            *args, s.first_tree, **host,
            sharded=forest_sharded.ShardedRows.create(s.mesh, args[:3], s.n, s.local))
        if s.tree_family == "depthwise":
            trees = node_table.trim_nodes(trees)
    elif not rounds.host_fit(args) and s.checkpoint_dir is None and not s.callbacks:
        # Under the caller's jax.vmap / jit: one traced program (progress from inside it).
        trees, counts = forest_binned.fit_forest_binned(*args, s.first_tree, config=config)
    else:  # a concrete fit: its chunks of trees from the host (Ctrl-C keeps the trees so far)
        trees, counts = _fit_forest_checkpointed(*args, s.first_tree, **host)
        if s.tree_family == "depthwise" and not isinstance(trees.features, jax.core.Tracer):
            trees = node_table.trim_nodes(trees)  # the node slots the trees use
    if e:  # the leaf means of y (the gains stay those of y * 2^-e: their ranking is the same)
        trees = trees._replace(leaf_values=trees.leaf_values * jnp.float32(2.0 ** e))
    return trees, counts


def _finish_forest(s, data: prepare.Data, trees, counts) -> forest_lib.Forest:
    """The last step of :func:`fit_forest`: the :class:`Forest` (a continued forest's trees
    first); traced hyperparameters outside their bounds give a NaN forest (with a warning)."""
    forest = forest_lib.Forest(trees=family.with_borders(trees, data.borders),
                               borders=data.borders, bag_weights=counts)
    if s.init_model is not None:  # its trees first, then the new ones
        arrays = lambda f: f._replace(borders=None, classes=None, feature_names=None)  # noqa: E731
        old = s.init_model
        if s.tree_family == "depthwise":  # node tables of one capacity (an old file's 2^D - 1)
            cap = max(old.trees.features.shape[-1], forest.trees.features.shape[-1])
            old = old._replace(trees=node_table.pad_nodes(old.trees, cap, s.n_bins))
            forest = forest._replace(trees=node_table.pad_nodes(forest.trees, cap, s.n_bins))
        forest = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]),
                                        arrays(old), arrays(forest)
                                        )._replace(borders=data.borders)
        if s.tree_family == "depthwise":  # the padded slots' borders, as grown null nodes have
            forest = forest._replace(trees=family.with_borders(forest.trees, data.borders))
    forest = forest._replace(classes=s.tab.classes, feature_names=s.tab.feature_names)
    # Traced hyperparameters (the caller's vmap) outside their bounds: a NaN forest, and a warning.
    return settings_lib.nan_outside_domains(forest, None, s.hyper)


#: The tree families of a forest (``fit_forest(tree_family=)``).
TREE_FAMILIES = ("oblivious", "depthwise")


def _forest_family_and_depth(tree_family, depth, init_model):
    """``fit_forest``'s tree family and depth: the given ones, else ``init_model``'s, else
    depth-wise trees of up to :data:`jboost.fitting.settings.MAX_DEPTHWISE_DEPTH` levels (grown until
    their nodes are pure or too small) or oblivious trees of 10."""
    continued = isinstance(init_model, forest_lib.Forest)
    if tree_family is None:
        tree_family = forest_lib.tree_family_of(init_model) if continued else "depthwise"
    if not isinstance(tree_family, str) or tree_family not in TREE_FAMILIES:
        raise ValueError(f"tree_family must be \"oblivious\" or \"depthwise\" for a forest; got "
                         f"{tree_family!r}.")
    if depth is None:
        if continued and forest_lib.tree_family_of(init_model) == tree_family:
            depth = init_model.depth
        else:
            depth = settings_lib.MAX_DEPTHWISE_DEPTH if tree_family == "depthwise" else 10
    depth = checks.check_int(depth, "depth", 1, settings_lib.MAX_DEPTHWISE_DEPTH
                                  if tree_family == "depthwise" else settings_lib.MAX_DEPTH)
    return tree_family, depth


def _check_init_forest(model, X, task: str, n_classes, borders, n_bins, depth, tree_family):
    """Check a forest to continue (``init_model=``); returns ``(borders, n_classes)`` to fit
    with: the model's borders and its K (a classification forest)."""
    if not isinstance(model, forest_lib.Forest):
        raise TypeError(f"init_model must be a Forest fitted by bagging.fit_forest; got "
                        f"{type(model).__name__}.")
    if forest_lib.tree_family_of(model) != tree_family:
        raise ValueError(f"tree_family={tree_family!r} differs from init_model's "
                         f"({forest_lib.tree_family_of(model)!r} trees): continue it with "
                         f"tree_family={forest_lib.tree_family_of(model)!r}.")
    X = tabular_lib.as_matrix(X, "X")
    borders = init_model_lib.check_init_model(model, forest_lib.Forest, X.shape[1], borders, n_bins=n_bins,
                                           depth=depth, who="bagging.fit_forest")
    if (task == "regression") == model.is_classifier:
        raise ValueError(f"task={task!r} differs from init_model's ({model.task!r} forest): "
                         f"continue it with its task.")
    if not model.is_classifier:
        return borders, None
    if n_classes is not None and int(n_classes) != model.n_outputs:
        raise ValueError(f"n_classes={n_classes} differs from init_model's {model.n_outputs} "
                         "classes: omit n_classes (the model's K is used).")
    return borders, model.n_outputs


def fit_bagged_trees(X, y, **kwargs) -> forest_lib.Forest:
    """Bagged trees (Breiman 1996; ESL Section 8.7): :func:`fit_forest` with every feature
    eligible at every split (``max_features=None``), which it takes all other arguments of."""
    if "max_features" in kwargs:
        raise TypeError("fit_bagged_trees() takes no max_features: bagging draws every feature "
                        "(use fit_forest(max_features=...) for a random forest).")
    return fit_forest(X, y, max_features=None, **kwargs)


_FOREST_SIGNATURE = inspect.signature(fit_forest)
fit_bagged_trees.__signature__ = _FOREST_SIGNATURE.replace(parameters=[
    p for p in _FOREST_SIGNATURE.parameters.values() if p.name != "max_features"])
