"""Interaction constraints: which features may split on one path from a tree's root to a leaf
(``interaction_constraints=``, a list of feature groups).

XGBoost's definition (its "Feature Interaction Constraints" tutorial, ``src/tree/constraints.cc``):
features on one root-to-leaf path interact. At the root every feature may split. A node whose path
has split on the features ``U`` may split on ``U`` itself and on every feature of every group that
holds all of ``U``. So the features of any path are one feature alone, or all inside one group: a
feature in no group splits only on paths of that feature alone, and with disjoint groups a tree's
features (every path holds its root's) lie in the root's group. Overlapping groups may give two
paths of one tree features that share no group (``[[0, 1], [1, 2]]``: the root on 1, one child on 0,
the other on 2), as in XGBoost.

**Oblivious trees**: a level splits every node on one feature, so the tree is one path: each level
may split on the features the rule allows after the levels above, and the tree's features are one
feature alone or inside one group.

Only the features a node may split on change; gains and leaf values are as without constraints, so
every algorithm and split criterion takes them. See docs/guide/constraints.md.
"""

from __future__ import annotations

from typing import Optional

import jax.numpy as jnp
import numpy as np


def resolve(constraints, n_features: int, names=None) -> Optional[tuple]:
    """The groups as a sorted tuple of sorted feature-index tuples (``None`` when there are
    none), from a sequence of groups, each a sequence of feature indices or column names (a
    DataFrame's); an error names the argument and the fix."""
    if constraints is None:
        return None
    if isinstance(constraints, (str, bytes, dict)) or not _sequence(constraints):
        raise ValueError(f"interaction_constraints must be a list of feature groups, each a list of "
                         f"feature indices or column names (e.g. [[0, 1], [2, 3, 4]]); got "
                         f"{constraints!r}.")
    known = list(names) if names is not None else []
    groups = []
    for group in constraints:
        if isinstance(group, (str, bytes)) or not _sequence(group):
            raise ValueError(f"interaction_constraints: each group must be a list of feature "
                             f"indices or column names; got {group!r} (write a group of one "
                             "feature as [f]).")
        members = set()
        for f in group:
            if isinstance(f, str):
                if f not in known:
                    raise ValueError(f"interaction_constraints names feature {f!r}, which X does "
                                     f"not have (its columns: {known[:20]}); name a column of X.")
                members.add(known.index(f))
            elif (isinstance(f, (int, np.integer)) and not isinstance(f, (bool, np.bool_))
                  and 0 <= int(f) < n_features):
                members.add(int(f))
            else:
                raise ValueError(f"interaction_constraints: {f!r} is neither a column name of X nor "
                                 f"a feature index in [0, {n_features}).")
        if not members:
            raise ValueError("interaction_constraints: a group is empty; drop it, or list the "
                             "features that may interact.")
        groups.append(tuple(sorted(members)))
    if not groups:
        raise ValueError("interaction_constraints=[] names no group: pass None for no constraints, "
                         "or the groups of features that may interact.")
    return tuple(sorted(set(groups)))


def _sequence(value) -> bool:
    """A list, tuple, range or array of at least one dimension (not a string or a number)."""
    if isinstance(value, np.ndarray):
        return value.ndim >= 1
    return isinstance(value, (list, tuple, range))


def as_table(groups: tuple) -> np.ndarray:
    """``(G, L)`` int32: group ``g``'s features in row ``g``, padded with ``-1`` (a model's
    settings record them so)."""
    table = np.full((len(groups), max(len(m) for m in groups)), -1, np.int32)
    for g, members in enumerate(groups):
        table[g, :len(members)] = members
    return table


def from_table(table) -> tuple:
    """The groups of :func:`as_table`'s ``table``."""
    return tuple(sorted(tuple(int(f) for f in row if f >= 0) for row in np.asarray(table)))


def group_matrix(groups: tuple, n_features: int) -> np.ndarray:
    """``(G, F)`` bool: feature ``f`` is in group ``g``."""
    m = np.zeros((len(groups), n_features), bool)
    for g, members in enumerate(groups):
        m[g, list(members)] = True
    return m


def allowed(used, groups: tuple):
    """``(..., F)`` bool: the features a node may split on, from ``used`` ``(..., F)``, the
    features its path has split on: every feature at the root (nothing used), else ``used`` and
    every feature of each group that holds all of ``used``."""
    m = jnp.asarray(group_matrix(groups, used.shape[-1]))                     # (G, F)
    holds = jnp.all(~used[..., None, :] | m, axis=-1)                         # (..., G)
    union = jnp.any(holds[..., :, None] & m, axis=-2)                         # (..., F)
    return jnp.where(jnp.any(used, axis=-1, keepdims=True), used | union, True)


def with_split(used, feature, split):
    """``used`` ``(..., F)`` with ``feature`` ``(...)`` added where ``split`` ``(...)`` (a node
    that does not split adds nothing)."""
    f = jnp.arange(used.shape[-1], dtype=jnp.int32)
    return used | ((f == jnp.asarray(feature, jnp.int32)[..., None]) & jnp.asarray(split)[..., None])


def combine(mask, used, groups: Optional[tuple], columns=None):
    """``mask`` (``None``: every feature) and the constraint's allowed features of paths ``used``
    (a no-op when ``groups`` is ``None``); ``columns``: the gathered features the mask's last axis
    stands for (``(m,)`` for every node, or ``(S, m)`` per node)."""
    if groups is None:
        return mask
    ok = allowed(used, groups)
    if columns is not None:
        columns = jnp.asarray(columns, jnp.int32)
        ok = (ok[..., columns] if columns.ndim == 1
              else jnp.take_along_axis(jnp.broadcast_to(ok, columns.shape[:1] + ok.shape[-1:]),
                                       columns, axis=-1))
    return ok if mask is None else mask & ok
