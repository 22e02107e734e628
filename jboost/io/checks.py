"""Checks of a loaded model's arrays against its type: oblivious trees, depth-wise node tables,
categorical tables, the protocol's properties and one abstract prediction (docs/io.md)."""

from __future__ import annotations

import numpy as np

from jboost.io import reader, registry
from jboost.losses import loss as loss_lib
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
    _check_tree_shape(path, flat, counts.reshape((flat.shape[0], -1)))


def _check_tree_shape(path, kids, counts) -> None:
    """Each node table ``kids (T, N, 2)`` is a tree: its ``I = sum(level_counts)`` splitting nodes
    ``0..I-1`` each have one parent (the root none), its leaves ``0..I`` one each, the other slots
    unreached, and level ``d`` holds ``level_counts[d]`` of its nodes (docs/trees.md, "Node
    tables"). A tree of no split is its root sending every row to leaf 0."""
    n_trees, n_nodes = kids.shape[:2]
    used = counts.sum(axis=-1)                                          # (T,)
    parent = (np.arange(n_nodes)[None, :] < used[:, None])[..., None] & np.ones((1, 1, 2), bool)
    empty = used == 0
    parent[empty, 0, :] = True  # the root of a tree of no split, read by the walk
    base = np.arange(n_trees)[:, None, None]
    nodes = np.bincount((base * n_nodes + kids)[parent & (kids >= 0)], minlength=n_trees * n_nodes)
    leaves = np.bincount((base * (n_nodes + 1) + ~kids)[parent & (kids < 0)],
                         minlength=n_trees * (n_nodes + 1))
    slots = np.arange(n_nodes + 1)[None, :]
    want_nodes = ((slots[:, :n_nodes] >= 1) & (slots[:, :n_nodes] < used[:, None])).astype(int)
    want_leaves = (slots <= used[:, None]).astype(int) * np.where(empty, 2, 1)[:, None]
    bad = np.flatnonzero((nodes.reshape(n_trees, n_nodes) != want_nodes).any(axis=1)
                         | (leaves.reshape(n_trees, n_nodes + 1) != want_leaves).any(axis=1))
    if bad.size:
        t = int(bad[0])
        n = int(used[t])
        raise reader.file_error(
            path, f"trees.children of tree {t} (flattened) do not form a tree of its {n} splitting "
                  f"nodes (the sum of its level_counts): nodes 1..{n - 1} and leaves 0..{n} should "
                  "each have one parent.")
    depth = np.full((n_trees, n_nodes), -1)
    depth[:, 0] = np.where(empty, -1, 0)
    for d in range(counts.shape[-1]):
        at = (depth == d)[..., None] & (kids >= 0)
        t_idx, _, _ = np.nonzero(at)
        depth[t_idx, kids[at]] = d + 1
    per_level = np.stack([(depth == d).sum(axis=-1) for d in range(counts.shape[-1])], axis=-1)
    bad = np.flatnonzero((per_level.reshape(counts.shape) != counts).any(axis=-1))
    if bad.size:
        t = int(bad[0])
        raise reader.file_error(
            path, f"trees.level_counts of tree {t} (flattened) is {counts[t].tolist()}; its nodes "
                  f"lie on the levels {per_level[t].tolist()}, which it should be.")


#: The check of each built-in tree family's arrays, by class (a custom family's: none).
FAMILY_CHECKS = {oblivious.ObliviousTrees: _check_rule_table,
                 depthwise_lib.DepthwiseTrees: _check_node_table}


def check_loaded_model(path, header, model) -> None:
    """Raise :class:`jboost.io.reader.ModelFileError` unless the model's arrays fit its type, each
    other and the header (docs/io.md, "Checks on load")."""
    fam = model.trees
    check_family = FAMILY_CHECKS.get(type(fam))
    if check_family is not None:
        check_family(path, fam)
    check_structure(path, model, exact_borders=header.get("moved_borders") is False)
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
    check_losses(path, model)
    names = header.get("feature_names")
    n_inputs = getattr(model, "n_inputs", model.n_features)
    if names is not None and (not isinstance(names, list) or len(names) != n_inputs
                              or not all(isinstance(v, str) for v in names)):
        raise reader.file_error(path, f"its header's feature_names should be {n_inputs} names (one "
                                "per input column) or null.")
    _check_prediction(path, model, _check_categorical(path, model))


def check_structure(path, model, exact_borders: bool) -> None:
    """The model type's own invariants (its ``check_structure``: shapes of its arrays against
    each other, splits against the bin borders, classes against the outputs, ...), as a
    :class:`jboost.io.reader.ModelFileError` naming the field."""
    check = getattr(model, "check_structure", None)
    if check is None:  # a model type registered without structure checks
        return
    try:
        check(exact_borders=exact_borders)
    except ValueError as e:
        raise reader.file_error(path, f"its {type(model).__name__} is inconsistent: {e}") from None
    except Exception as e:  # noqa: BLE001 - arrays of a hostile file a check cannot even read
        raise reader.file_error(path, f"its arrays do not form a {type(model).__name__} "
                                f"({type(e).__name__}: {e}).") from None


def check_losses(path, model) -> None:
    """Each loss of the model that computes a built-in loss function has that loss's task and
    kind (batch objective or per sample), its link unless a custom one was supplied at load, and
    label columns only as a per-column loss: what a file's edited ``task`` or ``link`` would
    otherwise change silently."""
    reg = registry.registry()
    known = set(map(id, reg["callables"].values()))
    for field in model._fields:
        loss = getattr(model, field)
        if not isinstance(loss, loss_lib.Loss) or loss.fn not in reg["losses"]:
            continue
        ref = reg["losses"][loss.fn]
        for attr in ("task", "link", "batch"):
            have, want = getattr(loss, attr), getattr(ref, attr)
            if have != want and (attr != "link" or id(have) in known):
                raise reader.file_error(path, f"its {field}.{attr} is {_named(have)}; the built-in "
                                        f"loss {ref.name!r} it computes has {_named(want)}.")
        if not loss.batch and loss.per_column != (loss.label_columns is not None):
            raise reader.file_error(path, f"its {field} has label_columns {loss.label_columns!r} "
                                    f"and per_column {loss.per_column}; the built-in loss "
                                    f"{ref.name!r} takes label columns only per column (both set, "
                                    "or neither).")


def _named(v) -> str:
    return repr(registry.recorded_name(v)) if callable(v) else repr(v)


def _check_categorical(path, model) -> int:
    """The categorical tables fit the columns' vocabularies and the trees the encoded features;
    returns the width of the rows the trees read."""
    cat = getattr(model, "categorical", None)
    if cat is None:
        return model.n_features
    # the leading axes of the tables: the batch's, and bagged boosters' bag axis
    spec, lead = cat.spec, tuple(np.shape(model.baseline)[:-1])
    want = {"sums": lead + (spec.n_table_rows, spec.n_stats), "counts": lead + (spec.n_table_rows,),
            "prior": lead + (spec.n_stats,), "prior_weight": lead}
    for f, shape in want.items():
        a = getattr(cat, f)
        if tuple(a.shape) != shape or a.dtype != np.dtype("float32"):
            raise reader.file_error(path, f"categorical.{f} is {a.dtype} {tuple(a.shape)}; its "
                                    f"columns need float32 {shape}.")
    if spec.n_features != model.n_features:
        raise reader.file_error(path, f"its categorical columns encode {spec.n_features} features; "
                                f"its trees have {model.n_features}.")
    return spec.encoded_width


def _check_prediction(path, model, width: int) -> None:
    """One abstract prediction (``jax.eval_shape``: shapes only) of rows ``(1, width)``."""
    import jax
    import jax.numpy as jnp

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
