"""The invariants a model's arrays keep with each other, which each model type's
``check_structure`` checks (a model file is checked against them on load: docs/io.md, "Checks
on load"). Each check raises ``ValueError`` naming the field and what it should be."""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

from jboost.losses import loss as loss_lib


def fail(field: str, what: str) -> ValueError:
    """The ``ValueError`` saying that ``field`` is inconsistent: ``what``."""
    return ValueError(f"{field} {what}")


def expect(field: str, a, shape: Sequence[int], dtypes: Sequence[str] = ("float32",),
           why: str = "") -> None:
    """Raise unless the array ``a`` has ``shape`` and one of ``dtypes`` (``why``: what the shape
    follows from)."""
    if a is None:
        raise fail(field, f"is missing; it should be {' or '.join(dtypes)} {tuple(shape)}{why}.")
    have = tuple(np.shape(a))
    dtype = np.dtype(getattr(a, "dtype", np.asarray(a).dtype))
    if have != tuple(shape) or dtype.name not in dtypes:
        raise fail(field, f"is {dtype.name} {have}; it should be {' or '.join(dtypes)} "
                          f"{tuple(shape)}{why}.")


def expect_optional(field: str, a, shape, dtypes=("float32",), why: str = "") -> None:
    """:func:`expect` for a field that may be ``None``."""
    if a is not None:
        expect(field, a, shape, dtypes, why)


def tree_lead(trees, lead: Tuple[int, ...], axes: Sequence[str]) -> Tuple[int, ...]:
    """The trees' leading axes (``features.shape[:-1]``), checked to be ``lead`` followed by the
    named ``axes`` (e.g. ``("n_rounds", "trees_per_round")``)."""
    have = tuple(np.shape(trees.features))[:-1]
    if len(have) != len(lead) + len(axes) or have[:len(lead)] != tuple(lead):
        raise fail("trees.features", f"has leading axes {have}; they should be {tuple(lead)} "
                                     f"+ ({', '.join(axes)}) (the model's other arrays' axes).")
    if 0 in have:
        raise fail("trees.features", f"has leading axes {have}; a model has at least one tree.")
    return have


def check_outputs(trees, k: int, field: str) -> None:
    """The trees' outputs (``leaf_values``' last axis) are ``k``, those of ``field``."""
    have = np.shape(trees.leaf_values)[-1]
    if have != k:
        raise fail("trees.leaf_values", f"has {have} outputs (its last axis); {field} has {k}, "
                                        f"so it should have {k}.")


def check_borders(borders, lead: Sequence[Tuple[int, ...]]) -> Tuple[int, int]:
    """``borders (*lead, F, n_bins - 1)`` float32, without NaN and non-decreasing along each
    feature (``lead``: the allowed leading axes); returns ``(F, n_bins - 1)``."""
    shape = tuple(np.shape(borders))
    if len(shape) < 2 or shape[:-2] not in [tuple(x) for x in lead] or 0 in shape[-2:]:
        raise fail("borders", f"has shape {shape}; it should be one of "
                              f"{[tuple(x) + ('F', 'n_bins - 1') for x in lead]} with F >= 1 and "
                              "n_bins >= 2.")
    expect("borders", borders, shape)
    b = np.asarray(borders)
    if np.isnan(b).any():
        raise fail("borders", "holds NaN; bin borders are numbers (padded with +inf).")
    if not (b[..., 1:] >= b[..., :-1]).all():
        raise fail("borders", "is not non-decreasing along each feature; bin borders are sorted.")
    return shape[-2], shape[-1]


def used_splits(trees) -> np.ndarray:
    """Which splits a prediction's walk reads: every level of oblivious trees; of node tables
    (a family with ``children``), the nodes a row can reach from the root whose two children
    differ (the checks of the table itself: :mod:`jboost.io.checks`)."""
    features = np.asarray(trees.features)
    children = getattr(trees, "children", None)
    if children is None:
        return np.ones(features.shape, bool)
    n = features.shape[-1]
    kids = np.asarray(children).reshape((-1, n, 2))
    rows = np.arange(kids.shape[0])[:, None]
    reached = np.zeros((kids.shape[0], n + 1), bool)
    frontier = reached.copy()
    frontier[:, 0] = True
    for _ in range(n):
        reached |= frontier
        step = np.where(frontier[:, :n, None] & (kids >= 0) & (kids < n), kids, n)
        frontier = np.zeros_like(reached)
        frontier[rows, step.reshape(kids.shape[0], -1)] = True
        frontier[:, n] = False
        if not frontier.any():
            break
    used = reached[:, :n] & (kids[..., 0] != kids[..., 1])
    return used.reshape(features.shape)


def check_splits(trees, borders, exact_borders: bool) -> None:
    """Every split's feature in ``[0, F)`` and threshold in ``[0, n_bins - 1)`` of ``borders (...,
    F, n_bins - 1)`` (whose leading axes are the trees' first), and its float border the bin border
    its threshold names, ``borders[f, t]`` (a row goes right iff ``x > border``, iff its bin ``>
    t``); with ``exact_borders=False`` (a fine-tuned model's moved thresholds), a border within
    that bin, ``borders[f, t - 1] <= border <= borders[f, t]`` (the first and last bins open)."""
    fields = [getattr(trees, f, None) for f in ("features", "thresholds", "borders")]
    if any(a is None for a in fields):  # a custom family without bin thresholds
        return
    feats, thr, b = (np.asarray(a) for a in fields)
    grid = np.asarray(borders)
    n_features, n_thr = grid.shape[-2:]
    lead = grid.shape[:-2]
    if feats.shape[:len(lead)] != lead:
        raise fail("borders", f"has leading axes {lead}; the trees' are {feats.shape[:-1]}, which "
                              "should start with them.")
    for name, what, a, size in (("features", "feature indices", feats, n_features),
                                ("thresholds", "bin thresholds", thr, n_thr)):
        if a.size and (a.min() < 0 or a.max() >= size):
            raise fail(f"trees.{name}", f"holds {what} in [{a.min()}, {a.max()}]; they should be "
                                        f"in [0, {size}) (borders has shape {grid.shape}).")
    m = int(np.prod(lead, dtype=np.int64))
    flat = grid.reshape((m, n_features * n_thr)).astype(np.float64)
    idx = (feats.astype(np.int64) * n_thr + thr).reshape((m, -1))
    at = np.take_along_axis(flat, idx, axis=1).reshape(feats.shape)
    below = np.take_along_axis(flat, np.maximum(idx - 1, 0), axis=1).reshape(feats.shape)
    used = used_splits(trees)
    b = b.astype(np.float64)
    if exact_borders:
        bad = used & ~(b == at)
        what = "the bin border its threshold names, borders[feature, threshold]"
    else:
        lo = np.where(thr > 0, below, -np.inf)
        hi = np.where(thr < n_thr - 1, at, np.inf)
        bad = used & ~((lo <= b) & (b <= hi))
        what = ("within the bin its threshold names, [borders[feature, threshold - 1], "
                "borders[feature, threshold]]")
    if bad.any():
        i = tuple(int(v) for v in np.argwhere(bad)[0])
        raise fail(f"trees.borders{list(i)}", f"is {float(b[i])!r} (feature {feats[i]}, threshold "
                                              f"{thr[i]}); it should be {what} = {float(at[i])!r}.")


def check_weights(field: str, weights) -> None:
    """Observation weights (bootstrap counts): finite and non-negative (0: out of bag)."""
    w = np.asarray(weights)
    if w.size and not (np.isfinite(w) & (w >= 0)).all():
        raise fail(field, f"holds weights in [{w.min()}, {w.max()}]; they should be finite and "
                          ">= 0 (0: a row out of the bag).")


def check_best_round(best, lead: Tuple[int, ...], n_rounds: int) -> None:
    """``best_round``: ``None`` or int32 ``lead`` rounds in ``[0, n_rounds)``."""
    if best is None:
        return
    expect("best_round", best, lead, ("int32",), " (one per ensemble)")
    a = np.asarray(best)
    if a.size and (a.min() < 0 or a.max() >= n_rounds):
        raise fail("best_round", f"holds rounds in [{a.min()}, {a.max()}]; they should be in "
                                 f"[0, {n_rounds}) (the trees have {n_rounds} rounds).")


def check_loss(field: str, loss, k: int, lead: Tuple[int, ...]) -> None:
    """A model's :class:`jboost.Loss` fits its ``k`` raw outputs: ``n_outputs == k``, label
    columns (vector labels: ``k`` of them), the task's outputs, and every parameter with the
    model's leading axes ``lead`` in front."""
    if not isinstance(loss, loss_lib.Loss):
        raise fail(field, f"is a {type(loss).__name__}; it should be a jboost.Loss.")
    if loss.n_outputs != k:
        raise fail(f"{field}.n_outputs", f"is {loss.n_outputs!r}; the trees have {k} raw outputs, "
                                         f"so it should be {k}.")
    if loss.per_column and loss.label_columns is None:
        raise fail(f"{field}.label_columns", "is None; a per-column loss has its label columns.")
    if loss.label_columns is not None and not loss.batch and loss.label_columns != k:
        raise fail(f"{field}.label_columns", f"is {loss.label_columns}; a loss of vector labels "
                                             f"has one output per column, so it should be {k}.")
    if loss.task == "multiclass" and (k < 2 or loss.label_columns is not None):
        raise fail(f"{field}.task", f"is 'multiclass' with {k} outputs; a K-class loss has K >= 2 "
                                    "outputs and one label per row.")
    if loss.task == "binary" and k != 1 and loss.label_columns is None:
        raise fail(f"{field}.task", f"is 'binary' with {k} outputs; it should have 1 output (or "
                                    "one per label column).")
    for name, p in loss.params.items():
        if tuple(np.shape(p))[:len(lead)] != tuple(lead):
            raise fail(f"{field}.params[{name!r}]", f"has shape {tuple(np.shape(p))}; it should "
                                                    f"have the model's leading axes {tuple(lead)}.")


def n_classes_of(loss, k: int) -> Optional[int]:
    """The class probabilities of a model of ``k`` raw outputs and ``loss``: 2 for one output of a
    binary loss, ``k`` for a K-class one; ``None`` for other tasks and vector labels."""
    if loss.task not in loss_lib.CLASSIFICATION or loss_lib.keeps_columns(loss):
        return None
    return 2 if k == 1 else k


def check_classes(classes, n_classes: Optional[int]) -> None:
    """``classes``: ``None``, or ``n_classes`` distinct sorted labels (``fit`` maps labels to
    ``0..K-1`` in sorted order; ``n_classes`` ``None``: a model without classes)."""
    if classes is None:
        return
    labels = np.asarray(classes.array)
    if n_classes is None:
        raise fail("classes", f"holds {labels.size} labels; this model (not a classifier of "
                              "labels per row) has no classes: it should be None.")
    if labels.ndim != 1 or labels.size != n_classes:
        raise fail("classes", f"holds {labels.size} labels; the model's outputs give {n_classes} "
                              f"class probabilities, so it should hold {n_classes}.")
    try:
        ordered = bool(np.all(labels[1:] > labels[:-1]))
    except TypeError:
        ordered = False
    if not ordered:
        raise fail("classes", f"is {labels.tolist()[:10]}; class labels are distinct and sorted "
                              "(as fit maps them to 0..K-1).")


def check_feature_names(names, n_inputs: int) -> None:
    """``feature_names``: ``None`` or one name per input column."""
    if names is not None and len(names) != n_inputs:
        raise fail("feature_names", f"holds {len(names)} names; the model has {n_inputs} input "
                                    f"columns, so it should hold {n_inputs}.")
