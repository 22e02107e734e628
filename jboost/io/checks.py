"""Checks of a loaded model's arrays against its type: oblivious trees, depth-wise node tables,
categorical tables, the protocol's properties and one abstract prediction (docs/io.md)."""

from __future__ import annotations

import numpy as np

from jboost.io import reader
from jboost.trees import depthwise as depthwise_lib, oblivious

#: The fields of oblivious trees, and of depth-wise trees in the dense heap layout (format
#: versions 1-4), with their dtypes.
RULE_DTYPES = {"features": "int32", "thresholds": "int32", "borders": "float32",
                "missing_right": "bool", "leaf_values": "float32", "gains": "float32"}


def check_dtypes(path, fam, want) -> None:
    """Every field of ``fam`` (a NamedTuple or a dict) named in ``want`` has its dtype."""
    for f, dt in want.items():
        a = fam[f] if isinstance(fam, dict) else getattr(fam, f)
        if a.dtype != np.dtype(dt):
            raise reader.file_error(path, f"trees.{f} is {a.dtype}, not {dt}.")


def check_same_shape(path, fam, names, shape) -> None:
    """Raise :class:`jboost.io.reader.ModelFileError` unless every tree field in ``names`` has
    ``shape``."""
    for f in names:
        a = fam[f] if isinstance(fam, dict) else getattr(fam, f)
        if a.shape != shape:
            raise reader.file_error(path, f"trees.{f} has shape {a.shape}; trees.features has {shape}.")


def _check_rule_table(path, fam) -> None:
    """Oblivious trees: dtypes, and shapes of a rule per level and ``2**D`` leaves."""
    check_dtypes(path, fam, RULE_DTYPES)
    shape = fam.features.shape
    check_same_shape(path, fam, ("thresholds", "borders", "missing_right", "gains"), shape)
    lv = fam.leaf_values.shape
    n_leaves = 2 ** shape[-1] if shape else 0
    if not shape or len(lv) != len(shape) + 1 or lv[:-2] != shape[:-1] or lv[-2] != n_leaves:
        raise reader.file_error(path, f"trees.leaf_values has shape {lv}; ObliviousTrees of rule shape "
                                f"{shape} need {shape[:-1] + (n_leaves,)} + (K,), a power of 2 leaves.")


def _check_node_table(path, fam) -> None:
    """Depth-wise trees' node tables: dtypes, shapes, and children that name nodes after their
    parent or leaves in range (docs/io.md)."""
    check_dtypes(path, fam, {**RULE_DTYPES, "children": "int32", "level_counts": "int32"})
    shape = fam.features.shape
    if len(shape) < 2 or shape[-1] < 1:
        raise reader.file_error(path, f"trees.features has shape {shape}; DepthwiseTrees need leading tree "
                          "axes and at least one node slot.")
    check_same_shape(path, fam, ("thresholds", "borders", "missing_right", "gains"), shape)
    n_nodes, lead = shape[-1], shape[:-1]
    if fam.children.shape != shape + (2,):
        raise reader.file_error(path, f"trees.children has shape {fam.children.shape}; DepthwiseTrees of "
                          f"{n_nodes} node slots need {shape + (2,)}.")
    lv = fam.leaf_values.shape
    if len(lv) != len(shape) + 1 or lv[:-2] != lead or lv[-2] != n_nodes + 1:
        raise reader.file_error(path, f"trees.leaf_values has shape {lv}; DepthwiseTrees of {n_nodes} node "
                          f"slots need {lead + (n_nodes + 1,)} + (K,).")
    lc = fam.level_counts.shape
    if len(lc) != len(shape) or lc[:-1] != lead:
        raise reader.file_error(path, f"trees.level_counts has shape {lc}; DepthwiseTrees of rule shape "
                          f"{shape} need {lead} + (depth,).")
    children = np.asarray(fam.children)
    parent = np.arange(n_nodes).reshape((n_nodes, 1))
    bad = np.where(children >= 0, (children <= parent) | (children >= n_nodes), children < -(n_nodes + 1))
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        raise reader.file_error(path, f"trees.children{list(at)} = {int(children[at])}: a child must be a "
                          f"node after its parent (< {n_nodes}) or a leaf ~l with l <= {n_nodes}.")
    # Every node a row can reach lies above level D (the walk takes D steps, then reads a leaf).
    depth = lc[-1]
    flat = children.reshape((-1, n_nodes, 2))
    rows = np.arange(flat.shape[0])[:, None]
    frontier = np.zeros((flat.shape[0], n_nodes), bool)
    frontier[:, 0] = True
    for _ in range(max(depth, 1)):
        kids = np.where(frontier[..., None] & (flat >= 0), flat, n_nodes).reshape(flat.shape[0], -1)
        frontier = np.zeros((flat.shape[0], n_nodes + 1), bool)
        frontier[rows, kids] = True
        frontier = frontier[:, :n_nodes]
    if frontier.any():
        raise reader.file_error(path, f"trees.children lead below level {max(depth, 1)}: the trees have depth "
                          f"{depth} (trees.level_counts has shape {lc}).")
    counts = np.asarray(fam.level_counts)
    if counts.size and (counts.min() < 0 or counts.sum(axis=-1).max() > n_nodes):
        raise reader.file_error(path, f"trees.level_counts has entries in [{counts.min()}, {counts.max()}] "
                          f"summing to at most {counts.sum(axis=-1).max()}; the trees have "
                          f"{n_nodes} node slots.")


#: The check of each built-in tree family's arrays, by class (a custom family's: none).
FAMILY_CHECKS = {oblivious.ObliviousTrees: _check_rule_table,
                 depthwise_lib.DepthwiseTrees: _check_node_table}


def check_loaded_model(path, header, model) -> None:
    """Raise :class:`jboost.io.reader.ModelFileError` unless the model's arrays fit its type and
    the header (docs/io.md)."""
    import jax
    import jax.numpy as jnp

    fam = model.trees
    check_family = FAMILY_CHECKS.get(type(fam))
    if check_family is not None:
        check_family(path, fam)
    try:
        props = (int(model.n_features), [int(s) for s in model.batch_shape], int(model.n_stages),
                 str(model.task))
    except Exception as e:  # noqa: BLE001 - inconsistent arrays of a hostile file
        raise reader.file_error(path, f"its arrays do not form a {type(model).__name__} ({e}).") from None
    said = tuple(header.get(k) for k in ("n_features", "batch_shape", "n_stages", "task"))
    if props != said:
        raise reader.file_error(path, f"its arrays give (n_features, batch_shape, n_stages, task) = {props}; "
                          f"its header says {said}.")
    features = np.asarray(fam.features)
    if features.size and (features.min() < 0 or features.max() >= model.n_features):
        raise reader.file_error(path, f"its trees split on feature indices in [{features.min()}, "
                          f"{features.max()}]; the model has {model.n_features} features.")

    width = model.n_features
    cat = getattr(model, "categorical", None)
    if cat is not None:  # the tables fit the columns' vocabularies; the trees the encoded features
        # the leading axes of the tables: the batch's, and bagged boosters' bag axis
        spec, lead = cat.spec, tuple(np.shape(model.baseline)[:-1])
        want = {"sums": lead + (spec.n_table_rows, spec.n_stats), "counts": lead + (spec.n_table_rows,),
                "prior": lead + (spec.n_stats,), "prior_weight": lead}
        for f, shape in want.items():
            a = getattr(cat, f)
            if tuple(a.shape) != shape or a.dtype != np.dtype("float32"):
                raise reader.file_error(path, f"categorical.{f} is {a.dtype} {tuple(a.shape)}; its columns need "
                                  f"float32 {shape}.")
        if spec.n_features != model.n_features:
            raise reader.file_error(path, f"its categorical columns encode {spec.n_features} features; its trees "
                              f"have {model.n_features}.")
        width = spec.encoded_width

    def one(m, X):
        return m.raw_scores(X)

    fn = one
    for _ in model.batch_shape:
        fn = jax.vmap(fn, in_axes=(0, None))
    try:
        jax.eval_shape(fn, model, jax.ShapeDtypeStruct((1, width), jnp.float32))
    except Exception as e:  # noqa: BLE001 - shapes that cannot predict
        raise reader.file_error(path, f"its arrays have shapes a {type(model).__name__} cannot predict with "
                          f"({type(e).__name__}: {e}).") from None
