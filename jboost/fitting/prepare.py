"""A fit's inputs: class labels mapped to codes, and X/y/weights/eval_set
checked and binned into Data. See docs/fitting.md."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from jboost import checks
from jboost.data import binning, categorical_stats, labels, rows, tabular
from jboost.engine import distributed, state
from jboost.losses import loss as loss_lib, per_sample


class Data(NamedTuple):
    """Training and validation arrays after the host-side checks and binning (without an eval
    set the validation arrays have 0 rows)."""

    X_binned: jax.Array  # (F, n) uint8
    y: jax.Array         # (n,) float32
    w: jax.Array         # (n,) float32
    X_valid: jax.Array   # (F, m) uint8
    y_valid: jax.Array   # (m,)
    w_valid: jax.Array   # (m,)
    borders: jax.Array   # (F, n_bins - 1)

    @property
    def missing(self) -> bool:
        """Whether any training row has a missing value (static: halves the split search when not)."""
        return binning.has_missing(self.X_binned, self.borders.shape[1] + 1)


def prepare(X, y, *, sample_weight=None, eval_set=None, n_bins: int = 256, borders=None,
            label_check: Optional[Callable[[np.ndarray, str], Any]] = None,
            weighted_borders: bool = True, label_columns: bool = False) -> Data:
    """Check ``X``, ``y``, ``sample_weight`` and ``eval_set``, compute (or check) the borders and
    bin everything; ``label_check(labels, name)`` validates the labels, ``label_columns``
    allows ``(n, C)`` labels, ``weighted_borders`` takes sample-weighted quantiles."""
    X = tabular.as_matrix(X, "X")
    n, n_features = X.shape
    y = labels.as_labels(y, n, columns=None if label_columns else 0)
    if label_check is not None:
        label_check(y, "y")
    w = tabular.as_weights(sample_weight, n)
    n_bins = checks.check_int(n_bins, "n_bins", 3, binning.MAX_BINS)
    if borders is None:
        borders = binning.compute_borders(X, n_bins, sample_weight=w if weighted_borders else None)
    else:
        borders = binning.check_borders(borders, n_features, n_bins)
    X_binned = binning.bin_features(X, borders)
    if eval_set is None:
        Xv = jax.device_put(np.zeros((n_features, 0), binning.X_BINNED_DTYPE))
        yv = np.zeros((0,) + y.shape[1:], np.float32)
        wv = np.zeros((0,), np.float32)
    else:
        if not isinstance(eval_set, (tuple, list)) or len(eval_set) not in (2, 3):
            raise TypeError("eval_set must be a tuple (X_valid, y_valid) or (X_valid, y_valid, w_valid).")
        Xv_host = tabular.as_matrix(eval_set[0], "eval_set X")
        if Xv_host.shape[1] != n_features:
            raise ValueError(f"eval_set X has {Xv_host.shape[1]} features but X has {n_features}.")
        m = Xv_host.shape[0]
        if y.ndim == 1 and np.ndim(eval_set[1]) == 2:
            raise ValueError(f"eval_set y has shape {np.shape(eval_set[1])} but y is 1-D: give the "
                             "validation labels the shape of the training labels.")
        yv = labels.as_labels(eval_set[1], m, "eval_set y", "eval_set X",
                       columns=y.shape[1] if y.ndim == 2 else 0)
        if label_check is not None:
            label_check(yv, "eval_set y")
        wv = (np.ones((m,), np.float32) if len(eval_set) == 2
              else tabular.as_weights(eval_set[2], m, "eval_set weights", "eval_set X"))
        Xv = binning.bin_features(Xv_host, borders)
    # jax.device_put, not jnp.asarray: no program is compiled per row count (docs/compile.md)
    return Data(X_binned, *jax.device_put((y, w)), Xv, *jax.device_put((yv, wv, borders)))


def prepare_boosting(X, y, **kwargs):
    """:func:`prepare` as ``(jboost.engine.state.Data, borders)``."""
    data = prepare(X, y, **kwargs)
    return state.Data(*data[:6]), data.borders


def _is_class_index(arr: np.ndarray) -> bool:
    """Whether labels already are class indices: bools, or non-negative integers (non-finite
    floats count: :func:`as_labels` refuses them)."""
    if arr.dtype.kind == "b":
        return True
    if arr.dtype.kind in "iu":
        return arr.size == 0 or int(arr.min()) >= 0
    if arr.dtype.kind == "f":
        finite = arr[np.isfinite(arr)]
        return bool(np.all(finite >= 0) and np.all(finite == np.round(finite)))
    return False


def class_labels(y, loss, n_outputs: Optional[int] = None, task: Optional[str] = None,
                 name: str = "y"):
    """``(labels, classes)``: class labels mapped to ``0..K-1`` in sorted order for a
    classification loss, and the distinct labels (``classes`` ``None``: ``y`` returned as it
    is). See docs/fitting.md."""
    if checks.is_traced(y) or isinstance(y, jax.Array):
        return y, None
    y = tabular.series_values(y)
    arr = np.asarray(y)
    if arr.dtype.kind == "O" and arr.ndim == 1 and arr.size and all(
            isinstance(v, str) for v in arr.tolist()):
        arr = arr.astype(str)
    if arr.ndim != 1 or arr.size == 0 or _is_class_index(arr):
        return y, None
    try:
        resolved_task = per_sample.get(loss, n_outputs=n_outputs, task=task).task
    except Exception:  # noqa: BLE001 - resolve_loss gives the loss's own message next
        resolved_task = None
    numeric = arr.dtype.kind in "iuf"
    if resolved_task not in loss_lib.CLASSIFICATION:
        if numeric:
            return y, None
        examples = ", ".join(repr(v) for v in list(dict.fromkeys(arr.tolist()))[:3])
        raise TypeError(f"{name} holds non-numeric labels ({examples}, dtype {arr.dtype}): class "
                        "labels need a classification loss (loss='binomial_deviance' for 2 "
                        "classes, 'multinomial_deviance' for more), or convert them to numbers "
                        "for regression.")
    if arr.dtype.kind == "O":
        bad = [v for v in arr.tolist() if v is None or (isinstance(v, float) and not np.isfinite(v))]
        if bad:
            raise ValueError(f"{name} holds missing class labels ({bad[0]!r}): every row needs a "
                             "class; drop those rows or give them a class of their own.")
    try:
        classes, codes = np.unique(arr, return_inverse=True)
    except TypeError as e:
        raise TypeError(f"{name} holds class labels of mixed types that cannot be sorted "
                        f"({e}): make them one type (e.g. all strings).") from None
    if arr.dtype.kind == "f" and not np.all(np.isfinite(classes)):
        return y, None  # as_labels names the NaN / inf
    if resolved_task == "binary" and len(classes) > 2:
        raise ValueError(f"{name} holds {len(classes)} classes ({classes[:5].tolist()}...) but the "
                         "loss is binary: use loss='multinomial_deviance' for K classes.")
    if len(classes) < 2:
        raise ValueError(f"{name} holds a single class label {classes.tolist()[0]!r}: a classifier's model "
                         "names each class it predicts, so it needs at least two (pass class "
                         "indices 0..K-1 to fit a model of classes absent from the labels).")
    if resolved_task == "multiclass" and n_outputs is not None and n_outputs != len(classes):
        raise ValueError(f"n_outputs={n_outputs} but {name} holds {len(classes)} class labels "
                         f"({classes[:5].tolist()}{'...' if len(classes) > 5 else ''}): labels "
                         "that are not class indices give K = the number of distinct labels. "
                         "Drop n_outputs, or pass class indices 0..K-1 to reserve classes absent "
                         "from the labels.")
    return codes.reshape(-1).astype(np.float32), classes


def mapped_labels(y, eval_set, loss, n_outputs, task, init_model, n_rows: Optional[int] = None):
    """:func:`class_labels` of ``y`` and ``eval_set``'s labels with the same classes (a continued
    fit's: ``init_model``'s); ``(y, classes or None, eval_set)``. ``n_rows``: X's rows, which
    ``y`` must have (checked first)."""
    if n_rows is not None and not checks.is_traced(y):
        tabular.check_length(y, n_rows)
    model_classes = getattr(init_model, "classes", None)
    if model_classes is not None:
        classes = model_classes.array
        y = labels.class_codes(y, classes, "y")
    else:
        y, classes = class_labels(y, loss, n_outputs, task)
        if init_model is not None and classes is not None:  # else a silent relabelling
            raise ValueError(f"y holds class labels {classes[:5].tolist()} that are not class "
                             "indices 0..K-1, but init_model was fitted on class indices: continue "
                             "it with the labels it was fitted on.")
    if classes is not None and isinstance(eval_set, (tuple, list)) and len(eval_set) in (2, 3):
        eval_set = (eval_set[0], labels.class_codes(eval_set[1], classes)) + tuple(eval_set[2:])
    return y, classes, eval_set


def categorical_data(plan, data: state.Data, borders, loss, key, prior, prior_weight,
                      n_bins: int, init_model=None):
    """``(data, borders, Categorical)``: the host-binned columns of ``plan``'s encoded rows
    followed by the ctr columns' ordered target statistics, their borders and bins (a continued
    fit's: ``init_model``'s prior, weight and borders). See docs/categorical.md."""
    spec = plan.spec
    init_cat = getattr(init_model, "categorical", None)
    if init_cat is not None:
        prior, prior_weight = init_cat.prior, init_cat.prior_weight
    own_prior = prior if init_cat is None else None  # a continued fit's: its statistics checked below
    spec, t = categorical_stats.checked_targets(spec, data.y, loss, own_prior, prior_weight)
    w = np.asarray(data.w, np.float32)
    if prior is None:  # the weighted mean of the statistic over the training rows
        prior = categorical_stats.default_prior(t, w)
    prior = jnp.broadcast_to(jnp.asarray(prior, jnp.float32), (t.shape[1],))
    prior_weight = jnp.asarray(prior_weight, jnp.float32)
    h, J = spec.host_width, len(spec.ctr_columns)
    if J == 0:  # one-hot columns only
        empty = jnp.zeros((0, t.shape[1]), jnp.float32)
        return data, borders, categorical_stats.Categorical(spec, empty, jnp.zeros((0,), jnp.float32),
                                                      prior, prior_weight)
    codes = np.asarray(plan.X[:, h:], np.int32)
    perm_key = jax.random.fold_in(key, categorical_stats.PERMUTATION_STREAM)
    values, ctr_borders, bins, sums, counts = categorical_stats.training_features(
        jnp.asarray(codes), jnp.asarray(t), jnp.asarray(w), perm_key, prior, prior_weight,
        jnp.asarray(spec.offsets), n_table_rows=spec.n_table_rows, n_bins=n_bins)
    if init_cat is not None:  # the model's borders of the statistics
        if init_cat.spec.n_stats != spec.n_stats:
            raise ValueError(f"init_model's categorical columns have {init_cat.spec.n_stats} "
                             f"statistics each; this fit's labels give {spec.n_stats}.")
        ctr_borders = jnp.asarray(init_model.borders)[h:]
        bins = categorical_stats.bin_values(values, ctr_borders)
    cat = categorical_stats.Categorical(spec, sums, counts, prior, prior_weight)
    X_binned = jnp.concatenate([jnp.asarray(data.X_binned)[:h], bins], axis=0)
    X_valid = data.X_valid
    if X_valid.shape[1]:
        valid_values = categorical_stats.ctr_values(cat, plan.X_valid[:, h:])
        X_valid = jnp.concatenate([jnp.asarray(X_valid)[:h],
                                   categorical_stats.bin_values(valid_values, ctr_borders)], axis=0)
    else:
        X_valid = jnp.zeros((spec.n_features, 0), X_binned.dtype)
    borders = jnp.concatenate([jnp.asarray(borders)[:h], ctr_borders], axis=0)
    return data._replace(X_binned=X_binned, X_valid=X_valid), borders, cat


def with_margins(data: state.Data, base_margin, eval_base_margin, eval_set, k: int):
    """``data`` with the checked per-row offsets of the training and validation rows."""
    if base_margin is None and eval_base_margin is None:
        return data
    check_margins(base_margin, eval_base_margin, eval_set)
    n, m = data.y.shape[0], data.y_valid.shape[0]
    margin = tabular.as_margin(base_margin, n, k)
    margin_valid = (None if eval_set is None else
                    tabular.as_margin(eval_base_margin, m, k, "eval_base_margin", "eval_set X"))
    return data._replace(margin=jnp.asarray(margin),
                         margin_valid=None if margin_valid is None else jnp.asarray(margin_valid))


def padded_rows(data: state.Data, size: int) -> state.Data:
    """``data`` with its training rows padded to ``size`` (:func:`jboost.data.rows.bucket`):
    bin 0, the last row's label, weight 0 and offset 0, so that the fit is bitwise the fit of
    the rows given (docs/compile.md, "Row buckets")."""
    if data.y.shape[0] == size:
        return data
    return data._replace(X_binned=rows.pad_columns(data.X_binned, size),
                         y=rows.pad(data.y, size, "edge"), w=rows.pad(data.w, size),
                         margin=rows.pad(data.margin, size))


def check_margins(base_margin, eval_base_margin, eval_set) -> None:
    """Refuse ``eval_base_margin`` without ``base_margin`` or ``eval_set``, and ``base_margin``
    with an ``eval_set`` but without ``eval_base_margin``."""
    if base_margin is None and eval_base_margin is not None:
        raise ValueError("eval_base_margin is given without base_margin: pass the training rows' "
                         "offsets too (or neither).")
    if eval_set is None and eval_base_margin is not None:
        raise ValueError("eval_base_margin is given without eval_set.")
    if eval_set is not None and base_margin is not None and eval_base_margin is None:
        raise ValueError("base_margin is given with an eval_set: pass eval_base_margin (the "
                         "offsets of eval_set's rows), or the validation scores would leave "
                         "them out.")


def local_rows(X, y, loss, sample_weight, eval_set, devices, cat_features, settings, **refused):
    """The checks and gathers of a multi-process fit (``rows="local"``); refuses what it does not
    support, after the settings are compared across processes (so every process raises alike)."""
    has_cats = cat_features is not None and not (np.ndim(cat_features) == 1 and len(cat_features) == 0)
    local = distributed.gather(X, y, sample_weight, eval_set, devices, dict(
        settings, cat_features=has_cats, **{k: v is not None for k, v in refused.items()}))
    # The settings are the same on every process from here: every process raises alike.
    given = [k for k, v in refused.items() if v is not None]
    if given:
        raise ValueError(f"rows='local' does not support {', '.join(k + '=' for k in given)} yet: "
                         "fit with rows='global' (every process passing the whole table) for them.")
    if has_cats:
        raise ValueError("rows='local' does not support cat_features yet: encode the categorical "
                         "columns as numbers (the same encoding on every process).")
    if isinstance(loss, loss_lib.Loss) and loss.batch:
        raise ValueError(f"loss: rows='local' does not support batch objectives ({loss.name!r}).")
    return local
