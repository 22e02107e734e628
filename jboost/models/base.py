"""The one model protocol, and the functions every fitted ensemble works with.

Every fitted ensemble of jboost -- a :class:`Booster` (from :func:`jboost.fit`, from every
algorithm of :mod:`jboost.algorithms`, or ``jax.vmap`` of them), a forest, bagged boosters, a
stacked or an ECOC ensemble -- is a pytree of arrays that implements :class:`Model`, so that

* :func:`predict` gives **raw scores** ``(n,)`` or ``(n, K)`` (the scale the trees add up on:
  log-odds, logits, the regression value; a forest's averaged leaf values; Cox log relative
  risks, ranking scores); a model of vector labels ``y (n, C)`` gives ``(n, C)``;
* :func:`predict_proba` gives **class probabilities** ``(n, n_classes)`` (classification;
  multi-label: ``(n, C)``, the probability of each label being 1);
* :func:`predict_class` gives **class labels** ``(n,)`` (multi-label: ``(n, C)`` of 0/1);
* :func:`predict_mean` gives the loss's link of the raw score (the mean for Poisson);
* :func:`feature_importance` gives the total split gain per feature, normalised;
* :func:`staged_predict` evaluates a function of the raw scores after every stage (a boosting
  round, or one more tree of a forest) in one compiled scan.

A model with leading batch axes (``jax.vmap(jboost.fit)`` over a sweep: ``model.batch_shape ==
(M,)``) predicts for every model at once, outputs ``(M, n, ...)``.

Every consumer of models (prediction, model files, SHAP values and partial dependence, feature
importance, fine-tuning, the scikit-learn wrappers, plots) works through the members of
:class:`Model` and never names a model class. To add a model type, write one module that defines
it, implements the members of :class:`Model` (a structural protocol: no base class to inherit)
and registers it with :func:`register_model_type` (and any other pytree classes its fields hold
with :func:`register_nested_type`), so that model files can name it; import that module in
:mod:`jboost.models`; and add it to ``tests/test_protocol.py``'s parametrised protocol test.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Protocol, Tuple, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from jboost import checks
from jboost.data import categorical as data_categorical
from jboost.data import tabular
from jboost.losses import loss as loss_lib
from jboost.models import metadata
from jboost.trees import family
from jboost.trees import oblivious


def expanded_rows(model, X):
    """The rows ``X`` (as users hold them) as the float features a model's trees split on,
    ``(n, model.n_features)``, for tools that read the trees directly (SHAP values, partial
    dependence on an encoded feature). One model (no batch axes)."""
    return encoded_features(model, X)

CLASSIFICATION = ("binary", "multiclass")


# --------------------------------------------------------------------------------------------
# The registry of model types (the classes model files name).
# --------------------------------------------------------------------------------------------

_MODEL_TYPES: Dict[str, type] = {}
_NESTED_TYPES: Dict[str, type] = {}


def _register(table: Dict[str, type], cls: type, what: str) -> type:
    name = cls.__name__
    known = table.get(name)
    if known is not None and known is not cls:
        raise ValueError(f"a {what} named {name!r} is registered already "
                         f"({known.__module__}.{known.__qualname__}): model files name {what}s "
                         "by their class name, which must be unique.")
    if not hasattr(cls, "_fields"):
        raise TypeError(f"{cls.__module__}.{cls.__qualname__} is not a NamedTuple: model files "
                        f"store a {what}'s fields by name.")
    table[name] = cls
    return cls


def register_model_type(cls: type) -> type:
    """Register a model type (a NamedTuple class implementing :class:`Model`): model files name
    it by its class name (``jboost.save`` writes it, ``jboost.load`` rebuilds it from its
    fields). Usable as a class decorator; returns ``cls``.

    Raises:
      ValueError: another class of the same name is registered.
      TypeError: ``cls`` is not a NamedTuple class.
    """
    return _register(_MODEL_TYPES, cls, "model type")


def register_nested_type(cls: type) -> type:
    """Register a NamedTuple pytree class a model's fields hold (a stacked model's
    ``LinearModel``, the ``Categorical`` tables of categorical columns), so that model files can
    name it. Usable as a class decorator; returns ``cls``.

    Raises:
      ValueError: another class of the same name is registered.
      TypeError: ``cls`` is not a NamedTuple class.
    """
    return _register(_NESTED_TYPES, cls, "nested type")


def model_types() -> Dict[str, type]:
    """The registered model types by class name (a copy)."""
    return dict(_MODEL_TYPES)


def nested_types() -> Dict[str, type]:
    """The registered nested pytree types by class name (a copy)."""
    return dict(_NESTED_TYPES)


@runtime_checkable
class Model(Protocol):
    """What every fitted ensemble provides (see the module docstring)."""

    trees: oblivious.ObliviousTrees  # every tree, leading axes (batch..., stages, ...)

    @property
    def n_features(self) -> int: ...

    @property
    def task(self) -> str: ...            # "regression" | "binary" | "multiclass" | "count"

    @property
    def batch_shape(self) -> Tuple[int, ...]: ...   # () for one model

    @property
    def n_stages(self) -> int: ...        # boosting rounds, or trees of a forest

    def raw_scores(self, X, n_stages: Optional[int] = None) -> jax.Array:
        """``(n, K)`` raw scores of one (unbatched) model for checked rows ``X (n, F)``."""

    def proba_from_raw(self, raw) -> jax.Array:
        """``(n, n_classes)`` probabilities from ``(n, K)`` raw scores (classification)."""

    def classes_from_raw(self, raw) -> jax.Array:
        """``(n,)`` class labels from ``(n, K)`` raw scores."""

    def staged(self, X, fn: Callable) -> Any:
        """``fn(raw (n, K))`` after every stage, stacked on a leading ``(n_stages,)`` axis."""

    def tree_sum(self, n_stages: Optional[int] = None) -> Tuple[Any, jax.Array, Optional[jax.Array]]:
        """One unbatched model as ``(trees, constant, offset)``: its raw scores are ``offset +
        constant + sum_t trees[t].leaf_values[leaf_t(x)]`` (``offset`` may be ``None``), the
        trees with one leading tree axis and leaf values ``(T, leaves, K)`` in the model's output
        units, of the stages :func:`predict` uses (``n_stages``, else every stage, or up to
        ``best_round``). What SHAP values, partial dependence and tree plots read
        (:func:`jboost.models.sums.tree_sum`)."""

    # Optional members (absent: the default after the dash):
    # ``proba(X, n_stages, margin=None) -> (n, n_classes)`` when the probabilities are not
    #   ``proba_from_raw`` of the combined raw score (bagged boosters average the bags'
    #   probabilities); predict_proba and predict_class then use it -- ``proba_from_raw``.
    # ``takes_base_margin = True`` (a class attribute) when per-row offsets of the raw scores
    #   (``base_margin=``) are part of its predictions (Booster, BaggedBoosters) -- False.
    # ``best_round``: with early stopping, the last round predictions use, ``()`` or one per
    #   ensemble of the model ``(E,)`` (its split gains ``(E, n_rounds, ...)``) -- None.
    # ``class_axis``: how the trees divide among the outputs for per-class importance:
    #   ``"bits"`` (one one-output ensemble per output on the first axis: ECOC) or
    #   ``"per_output"`` (tree ``p`` of every round is output ``p``) -- None (every tree moves
    #   every output).
    # ``no_tree_sum``: a message (a string) when the model is not one sum of trees of one feature
    #   matrix (bagged boosters with categorical columns), which SHAP values and partial
    #   dependence then raise as a TypeError -- None.
    # ``fine_tunable = True`` (a class attribute) when ``jboost.finetune`` can fine-tune its leaf
    #   values: its raw score is its baseline plus the sum of its trees (a Booster) -- False.
    # ``categorical``, ``feature_names``, ``classes``, ``loss``, ``n_outputs``, ``n_inputs``:
    #   the fit's metadata (see :class:`jboost.Booster`) -- None.


# --------------------------------------------------------------------------------------------
# Sums of trees on host or device rows.
# --------------------------------------------------------------------------------------------


def sum_of_trees(trees: oblivious.ObliviousTrees, X) -> jax.Array:
    """Sum of every tree's leaf value for rows ``X (n, F)`` -> ``(n, K)`` (:func:`jboost.trees.family.predict_raw`).

    Host arrays go to one device with ``jax.device_put`` (on CPU it shares a suitably aligned
    numpy buffer instead of copying it); a model fitted on several devices (replicated there) is
    brought to that device too, rather than every device predicting every row. Column-major
    arrays (Fortran order, or row slices of one: each column contiguous) go feature-major, as
    whole columns instead of a transposition.
    """
    if not isinstance(X, np.ndarray):
        return family.predict_raw(trees, X)
    leaves = trees.leaf_values
    device = None
    if (isinstance(leaves, jax.Array) and not checks.is_traced(leaves)
            and len(leaves.sharding.device_set) > 1):
        device = min(leaves.sharding.device_set, key=lambda d: d.id)
        trees = jax.device_put(trees, device)
    if X.shape[0] > 1 and X.strides[0] == X.itemsize:
        return family.predict_raw_feature_major(trees, jax.device_put(np.ascontiguousarray(X.T), device))
    return family.predict_raw(trees, jax.device_put(np.ascontiguousarray(X), device))


def first_stages(trees: oblivious.ObliviousTrees, n_stages: Optional[int], total: int,
                 name: str = "n_rounds") -> oblivious.ObliviousTrees:
    """The trees of the first ``n_stages`` stages (leading axis), checked against ``total``."""
    if n_stages is None:
        return trees
    n_stages = checks.check_int(n_stages, name, 0, total)
    return jax.tree_util.tree_map(lambda a: a[:n_stages], trees)


def add_round(acc, trees_m: oblivious.ObliviousTrees, X_t):
    """``acc`` plus the values of the trees of one round ``(T, ...)`` at rows ``X_t (F, n)``,
    added one tree at a time in tree order: the order of :func:`jboost.trees.family.predict_raw`, so a
    staged sum equals the prediction of the same rounds bitwise."""
    leaves = jax.vmap(lambda t: t.leaf_index_raw(X_t))(trees_m)
    values = jax.vmap(lambda t, leaf: t.leaf_values[leaf])(trees_m, leaves)
    for p in range(values.shape[0]):  # static: trees per round
        acc = acc + values[p]
    return acc


def zero_after(trees, keep_rounds):
    """``trees`` with zero leaf values in the rounds (axis 0) where ``keep_rounds`` is False."""
    lv = trees.leaf_values
    keep = keep_rounds.reshape(keep_rounds.shape + (1,) * (lv.ndim - keep_rounds.ndim))
    return trees._replace(leaf_values=jnp.where(keep, lv, jnp.zeros((), lv.dtype)))


def per_output_axis(model) -> Optional[str]:
    """``"per_output"`` for a boosted model of ``K > 1`` outputs and one tree per output per
    round (``per_output_trees=True``: tree ``p`` is output ``p``), else ``None``: its
    ``class_axis``."""
    k = model.n_outputs
    if k > 1 and model.trees.features.shape[-2] == k:
        return "per_output"
    return None


def add_offset(raw, offset):
    """``raw + offset`` in the offset's dtype (float64 with ``jax_enable_x64``): a label offset
    (``Booster.offset``) is added last."""
    return raw if offset is None else raw.astype(offset.dtype) + offset


def require_classification(model, what: str) -> None:
    """Raise ``ValueError`` unless ``model`` is a classification model (``what``: the caller)."""
    if model.task not in CLASSIFICATION:
        name = getattr(getattr(model, "loss", None), "name", type(model).__name__)
        raise ValueError(f"{what} needs a classification model; {name!r} is a {model.task!r} model "
                         "(use jboost.predict for raw scores or jboost.predict_mean).")


# --------------------------------------------------------------------------------------------
# The functions of the protocol.
# --------------------------------------------------------------------------------------------


def check_model(model) -> None:
    """Raise ``TypeError`` unless ``model`` has the members of :class:`Model`."""
    for attr in ("raw_scores", "proba_from_raw", "classes_from_raw", "staged", "batch_shape",
                 "n_features", "task", "trees"):
        if not hasattr(model, attr):
            raise TypeError(f"model must be a fitted jboost ensemble (a Booster, Forest, "
                            f"BaggedBoosters, StackedBoosters or ECOCBoosters); got "
                            f"{type(model).__name__}, which has no {attr!r}.")


def batched(model, fn):
    """``fn(one_model)`` vmapped over the model's leading batch axes."""
    for _ in model.batch_shape:
        fn = jax.vmap(fn)
    return fn(model)


def _raw(model, X, n_rounds, base_margin=None, then=lambda raw: raw):
    """``then(raw scores)`` of the checked rows ``X`` (``(None, X)`` for zero rows), computed in
    row buckets (:func:`_by_row_buckets`)."""
    check_model(model)
    X = checked_rows(model, X)
    margin = _margin(model, base_margin, X.shape[0])
    if X.shape[0] == 0:
        return None, X
    return _by_row_buckets(model, X, margin, lambda X, margin: then(
        batched(model, lambda m: _plus(m.raw_scores(X, n_rounds), margin)))), X


def checked_rows(model, X, name: str = "X"):
    """Checked rows to predict: a DataFrame's columns matched by name (:func:`_in_order`); with
    categorical columns, encoded by the model's vocabularies
    (:func:`jboost.data.categorical.categorical_rows`); the column count checked."""
    X = in_order(model, X)
    cat = getattr(model, "categorical", None)
    if cat is None:
        return tabular.predict_matrix(X, model.n_features, name)
    return tabular.predict_matrix(data_categorical.categorical_rows(cat.spec, X, name),
                                      cat.spec.encoded_width, name)


def encoded_features(model, X):
    """The float features ``(n, model.n_features)`` a model's trees split on, for rows ``X`` as
    users hold them (one model): the rows themselves without categorical columns."""
    X = checked_rows(model, X)
    return model.features(X) if getattr(model, "categorical", None) is not None else X


def _input_width(model) -> int:
    cat = getattr(model, "categorical", None)
    return model.n_features if cat is None else cat.spec.encoded_width


def in_order(model, X):
    """A DataFrame's columns in the order of the model's feature names (matched by name)."""
    names = getattr(model, "feature_names", None)
    return tabular.frame_in_order(X, None if names is None else names.values)


def _margin(model, base_margin, n: int):
    """Checked per-row offsets ``(n, K)`` of a Booster's raw scores (``fit(base_margin=)``)."""
    if base_margin is None:
        return None
    if not getattr(model, "takes_base_margin", False):
        raise TypeError(f"base_margin is for models fitted with offsets (jboost.fit(base_margin=), "
                        f"jboost.bagging.fit_bagged_boosters(base_margin=)); got a "
                        f"{type(model).__name__}.")
    margin = tabular.as_margin(base_margin, n, model.n_outputs)
    return margin if isinstance(margin, np.ndarray) else jnp.asarray(margin)


def _plus(raw, margin):
    return raw if margin is None else raw + jnp.asarray(margin).astype(raw.dtype)


# Rows of host arrays are predicted in a few fixed batch sizes (buckets), so that a new batch
# size does not compile the prediction program again: at most
# 8 sizes per octave of rows, the smallest SMALLEST_BUCKET rows.
SMALLEST_BUCKET = 16


def row_bucket(n: int) -> int:
    """The batch size ``>= n`` that ``n`` rows are padded to: ``SMALLEST_BUCKET`` for a few rows,
    else the next multiple of ``2^(floor(log2 n) - 3)`` (at most 8 sizes per octave; at most
    12.5% padding)."""
    if n <= SMALLEST_BUCKET:
        return SMALLEST_BUCKET
    step = 1 << (n.bit_length() - 4)
    return -(-n // step) * step


def row_parts(n: int) -> Tuple[Tuple[int, int, int], ...]:
    """How ``n`` host rows are predicted: ``(start, stop, padded size)`` parts. The head is the
    largest bucket ``<= n`` (a view of the rows: no copy), the few rows left are padded to their
    own bucket."""
    if n <= SMALLEST_BUCKET:
        return ((0, n, SMALLEST_BUCKET),)
    step = 1 << (n.bit_length() - 4)
    head = n // step * step
    parts = ((0, head, head),)
    return parts if head == n else parts + ((head, n, row_bucket(n - head)),)


def _by_row_buckets(model, X, margin, fn):
    """``fn(X, margin)`` (rows on the axis after the model's batch axes) computed on bucketed
    row counts (:func:`row_parts`) for host rows, so that every call compiles only bucket sizes;
    the padded rows' results are dropped. Device arrays, and any rows of a traced model (inside
    the caller's ``jax.vmap`` or ``jit``), are passed as they are (their shapes are the caller's). Rows are predicted independently: the result is the same bit for
    bit."""
    n = X.shape[0]
    traced = any(checks.is_traced(v) for v in jax.tree_util.tree_leaves((model, margin)))
    parts = row_parts(n) if isinstance(X, np.ndarray) and not traced else ()
    if not parts or (len(parts) == 1 and parts[0][2] == n):
        return fn(X, margin)
    axis = len(model.batch_shape)
    outs = []
    for start, stop, size in parts:
        Xp, mp = X[start:stop], None if margin is None else np.asarray(margin[start:stop])
        if size > stop - start:
            Xp = np.concatenate([Xp, np.zeros((size - (stop - start),) + Xp.shape[1:], Xp.dtype)])
            if mp is not None:
                mp = np.concatenate([mp, np.zeros((size - (stop - start),) + mp.shape[1:], mp.dtype)])
        out = np.asarray(fn(Xp, mp))
        outs.append(out[(slice(None),) * axis + (slice(0, stop - start),)])
    return jax.device_put(outs[0] if len(outs) == 1 else np.concatenate(outs, axis=axis))


def _width(model, fn) -> int:
    """The last dimension of ``fn(one model, rows)``, from shapes alone (``jax.eval_shape``: nothing
    is compiled or run), for the empty result of predicting zero rows."""
    X1 = jax.ShapeDtypeStruct((1, _input_width(model)), jnp.float32)
    return jax.eval_shape(lambda m, X: batched(m, lambda one: fn(one, X)), model, X1).shape[-1]


def _empty(model, trailing: Tuple[int, ...], dtype=jnp.float32):
    return jnp.zeros(tuple(model.batch_shape) + (0,) + trailing, dtype)


def predict(model: Model, X, n_rounds: Optional[int] = None, base_margin=None) -> jax.Array:
    """Raw scores: ``(n,)`` for one-output models, ``(n, K)`` otherwise (with the model's batch
    axes in front).

    Args:
      model: any fitted jboost ensemble (:class:`Model`).
      X: ``(n, n_features)``; NaN is missing. A device array stays on its device.
      n_rounds: use only the first ``n_rounds`` stages (boosting rounds; trees of a forest).
      base_margin: the rows' raw-score offsets ``(n,)`` or ``(n, K)`` of a Booster fitted with
        ``jboost.fit(base_margin=)``, added to its raw scores (and so to what
        :func:`predict_proba`, :func:`predict_class` and :func:`predict_mean` see).
    """
    raw, X = _raw(model, X, n_rounds, base_margin,
                  then=lambda raw: loss_lib.as_predicted(raw, getattr(model, "loss", None)))
    if raw is None:
        k = _width(model, lambda m, X1: m.raw_scores(X1, n_rounds))
        return _empty(model, () if k == 1 and not keeps_columns(model) else (k,))
    return raw


def keeps_columns(model) -> bool:
    """A model of vector labels ``(n, C)`` predicts ``(n, C)``, even for ``C == 1``."""
    loss = getattr(model, "loss", None)
    return isinstance(loss, loss_lib.Loss) and loss_lib.keeps_columns(loss)


def predict_proba(model: Model, X, n_rounds: Optional[int] = None, base_margin=None) -> jax.Array:
    """Class probabilities ``(n, n_classes)`` (classification models).

    A model whose probabilities are not a function of its combined raw score (bagged boosters:
    the mean of the bags' probabilities) defines ``proba(X, n_stages)``, which is used instead
    of ``proba_from_raw(raw_scores(X))``.
    """
    check_model(model)
    require_classification(model, "predict_proba")
    X = checked_rows(model, X)
    margin = _margin(model, base_margin, X.shape[0])
    if X.shape[0] == 0:
        return _empty(model, (_width(model, lambda m, X1: _proba(m, X1, n_rounds)),))
    return _by_row_buckets(model, X, margin,
                           lambda X, margin: batched(model, lambda m: _proba(m, X, n_rounds, margin)))


def _proba(m, X, n_rounds, margin=None):
    if hasattr(m, "proba"):  # bagged boosters: the offsets go into every bag's raw scores
        return m.proba(X, n_rounds) if margin is None else m.proba(X, n_rounds, margin=margin)
    return m.proba_from_raw(_plus(m.raw_scores(X, n_rounds), margin))


def predict_class(model: Model, X, n_rounds: Optional[int] = None, base_margin=None) -> jax.Array:
    """Class labels ``(n,)`` (argmax of the probabilities; ECOC: the nearest codeword): class
    indices ``0..K-1``, or, for a model fitted on labels mapped to classes (strings, ``{-1, 1}``:
    ``model.classes``), those labels as a NumPy array."""
    check_model(model)
    require_classification(model, "predict_class")
    X = checked_rows(model, X)
    margin = _margin(model, base_margin, X.shape[0])
    if X.shape[0] == 0:
        empty = _empty(model, (), jnp.int32)
        return empty if getattr(model, "classes", None) is None else np.asarray(
            np.zeros(empty.shape, model.classes.array.dtype))
    if hasattr(model, "proba"):
        idx = _by_row_buckets(model, X, margin, lambda X, margin: batched(
            model, lambda m: jnp.argmax(_proba(m, X, n_rounds, margin), axis=-1)))
    else:
        idx = _by_row_buckets(model, X, margin, lambda X, margin: batched(
            model, lambda m: m.classes_from_raw(_plus(m.raw_scores(X, n_rounds), margin))))
    return metadata.labels_of(model, idx)


def predict_mean(model: Model, X, n_rounds: Optional[int] = None, base_margin=None) -> jax.Array:
    """The loss's link of the raw score: the mean for Poisson, the value for regression,
    probabilities for classification."""
    loss = getattr(model, "loss", None)
    if loss is None:
        check_model(model)
        raise TypeError(f"predict_mean needs a model with a loss; {type(model).__name__} has none "
                        "(use jboost.predict).")

    def one(m, r):
        return m.loss.link(loss_lib.as_predicted(r, m.loss), **m.loss.params)

    mean, X = _raw(model, X, n_rounds, base_margin, then=lambda raw: _batched_pair(model, raw, one))
    if mean is None:
        return predict(model, X, n_rounds)
    return mean


def _batched_pair(model, raw, fn):
    f = fn
    for _ in model.batch_shape:
        f = jax.vmap(f)
    return f(model, raw)


def staged_predict(model: Model, X, fn: Optional[Callable] = None, *args):
    """``fn(raw (n, K), *args)`` after every stage, stacked ``(n_stages, ...)``: one compiled
    ``lax.scan`` over the stages (boosting rounds, or trees of a forest), whose memory is one
    ``(n, K)`` score matrix however many stages. ``fn`` must be hashable (a module-level
    function: it is static in the compiled scan); default: the raw scores themselves.
    Stage ``m`` sees exactly ``jboost.predict(model, X, n_rounds=m)`` (``(n, K)``)."""
    check_model(model)
    if model.batch_shape:
        raise ValueError(f"staged_predict takes one model; this one has batch axes "
                         f"{model.batch_shape}: index it first (jax.tree_util.tree_map(lambda a: a[i], model)).")
    X = checked_rows(model, X)
    return model.staged(X, _identity if fn is None else fn, *args)


def _identity(raw):
    return raw


def used_gains(m) -> jax.Array:
    """The split gains of the rounds a prediction uses: with early stopping (``best_round``, of
    shape ``S``: ``()`` for a Booster, ``(B,)`` for bagged boosters, whose gains are
    ``S + (n_rounds, ...)``), the later rounds count 0, as :func:`predict` drops them."""
    gains, best = m.trees.gains, getattr(m, "best_round", None)
    if best is None:
        return gains
    best = jnp.asarray(best)
    keep = jnp.arange(gains.shape[best.ndim]) <= best[..., None]
    keep = keep.reshape(keep.shape + (1,) * (gains.ndim - keep.ndim))
    return jnp.where(keep, gains, jnp.zeros((), gains.dtype))


def feature_importance(model: Model, encoded: bool = False) -> jax.Array:
    """Total split gain per feature over the trees a prediction uses (rounds up to
    ``best_round``), normalised to sum to 1 ``(n_features,)`` (with the model's batch axes in
    front). ESL's relative importance and others: :func:`jboost.inspect.importance`.

    A model with categorical columns gives one importance per input column (its
    ``feature_names``): the gains of a column's one-hot indicators or target statistics added
    up; ``encoded=True`` gives them per encoded feature
    (:func:`jboost.data.categorical.encoded_names`)."""
    check_model(model)

    def one(m):
        gains = used_gains(m).reshape(-1)
        feats = m.trees.features.reshape(-1)
        total = jax.ops.segment_sum(gains, feats, num_segments=m.n_features)
        if not encoded:
            total = data_categorical.sum_by_input(m, total)
        return total / jnp.maximum(jnp.sum(total), 1e-30)

    return batched(model, one)
