"""Cross-validation folds: one partition of the rows, as fold ids and as weight masks.

A fold is a pair of weight masks over one copy of the data, so every fold's model has the same
shapes and a whole cross-validation is one ``vmap`` (:mod:`jboost.sweep`, :mod:`jboost.combine`).
See ``docs/data.md``.
"""

from __future__ import annotations

import numbers
from typing import Optional, Sequence, Tuple, Union

import jax.numpy as jnp
import numpy as np

from jboost import checks
from jboost.data import labels


def check_folds(folds, n: int, name: str = "folds") -> Optional[np.ndarray]:
    """Check a ``folds=`` argument: an int ``K`` in ``[2, n]`` (returns ``None``) or ``(n,)``
    integer fold ids ``0..K-1``, every id used, ``K >= 2`` (returns them as int32).

    Raises:
      ValueError: an int out of range, or fold ids that are not as above.
    """
    if isinstance(folds, (numbers.Integral, np.integer)) and not isinstance(folds, bool):
        checks.check_int(folds, name, 2, max(n, 2))
        if int(folds) > n:
            raise ValueError(f"{name}={folds} must not exceed the number of samples, {n}.")
        return None
    explicit = np.asarray(folds)
    if explicit.shape != (n,) or not np.issubdtype(explicit.dtype, np.integer):
        raise ValueError(f"{name} must be an int or an (n,) = ({n},) int array of fold ids; got "
                         f"{explicit.dtype} array of shape {explicit.shape}.")
    k = int(explicit.max()) + 1
    if explicit.min() < 0 or k < 2 or len(np.unique(explicit)) != k:
        raise ValueError(f"{name} ids must be 0..K-1 with every id used and K >= 2; got ids "
                         f"{np.unique(explicit)[:10].tolist()}.")
    return explicit.astype(np.int32)


def fold_ids(y, n_folds: int, seed: Union[int, Sequence[int]] = 0, stratified: bool = False) -> np.ndarray:
    """A random partition of the rows into ``n_folds`` folds: ``(n,)`` int32 fold of each row.

    A random permutation dealt round-robin; stratified (classification), the shuffled rows are
    grouped by class first, as scikit-learn's ``StratifiedKFold`` (Kohavi 1995; ``docs/data.md``).

    Args:
      y: ``(n,)`` labels (stratification groups rows by their value).
      n_folds: ``K`` in ``[2, n]``.
      seed: the random generator's seed (an int or a sequence of ints).
      stratified: whether to stratify by ``y``.

    Returns:
      ``(n,)`` int32 fold ids.

    Raises:
      TypeError: ``n_folds`` is not an int.
      ValueError: ``n_folds`` out of range, or labels that
        :func:`jboost.data.labels.as_labels` refuses.
    """
    y = labels.as_labels(y, len(y), warn=False)
    n = y.shape[0]
    n_folds = checks.check_int(n_folds, "folds", 2, max(n, 2))
    if n_folds > n:
        raise ValueError(f"folds={n_folds} must not exceed the number of samples, {n}.")
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    if stratified:
        order = order[np.argsort(y[order], kind="stable")]
    out = np.empty((n,), np.int32)
    out[order] = np.arange(n) % n_folds
    return out


def fold_table(y, sample_weight, folds, n_seeds: int, seed: Sequence[int] = (0,), *,
               stratified: bool = False, repeat: bool = True) -> Tuple[np.ndarray, int]:
    """The fold of every row under each of ``n_seeds`` seeds (repeated K-fold cross-validation).

    Args:
      y: ``(n,)`` labels (stratification groups rows by their value).
      sample_weight: ``(n,)`` non-negative weights.
      folds: the number of folds K, or ``(n,)`` fold ids (the same partition for every seed).
      n_seeds: the number of seeds S.
      seed: the integers every partition's random generator starts from (seed ``s`` draws with
        ``[*seed, s]`` when ``repeat``, else every seed uses ``s = 0``).
      stratified: stratified partitions (:func:`fold_ids`).

    Returns:
      ``(table, K)``: ``(S, n)`` int32 fold of every row under each seed, and the number of folds.

    Raises:
      ValueError: ``folds`` fails :func:`check_folds`, or a fold leaves no positively weighted
        row to train or to validate on.
    """
    y = np.asarray(y)
    n = y.shape[0]
    explicit = check_folds(folds, n)
    if explicit is None:
        n_folds = int(folds)
        table = np.stack([fold_ids(y, n_folds, seed=list(seed) + [s if repeat else 0],
                                   stratified=bool(stratified)) for s in range(n_seeds)])
    else:
        n_folds = int(explicit.max()) + 1
        table = np.broadcast_to(explicit, (n_seeds, n)).copy()
    w = np.asarray(sample_weight)
    for s in range(n_seeds):
        for f in range(n_folds):
            held = table[s] == f
            if not np.any(w[held] > 0) or not np.any(w[~held] > 0):
                raise ValueError(f"fold {f} of seed {s} leaves no positively weighted row to "
                                 "train or to validate on: use fewer folds or more samples.")
    return table, n_folds


def fold_masks(fold_ids, n_folds: int) -> jnp.ndarray:
    """``(K, n)`` float32 training weight masks of the folds: fold ``k``'s is 0 on its held-out rows
    and 1 elsewhere.
    """
    ids = jnp.asarray(fold_ids, jnp.int32)
    return (ids[None, :] != jnp.arange(n_folds)[:, None]).astype(jnp.float32)


def out_of_fold(per_fold, masks) -> jnp.ndarray:
    """Each row's prediction ``(n, ...)`` from the fold that held it out: ``per_fold (n_folds, n,
    ...)`` at the fold whose training weight ``masks (n_folds, n)`` is 0 for the row.
    """
    held = jnp.argmin(jnp.asarray(masks), axis=0)  # the fold whose weight for the row is 0
    per_fold = jnp.asarray(per_fold)
    idx = held.reshape((1, -1) + (1,) * (per_fold.ndim - 2))
    return jnp.take_along_axis(per_fold, idx, axis=0)[0]
