"""The model protocol (:class:`Model`), the registry of model types, and the functions every
fitted ensemble works with: :func:`predict`, :func:`predict_proba`, :func:`predict_class`,
:func:`predict_mean`, :func:`staged_predict`, :func:`feature_importance`.

See docs/models.md ("The model protocol") for what each returns and how to add a model type.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Optional, Protocol, Tuple, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jboost import _compile, checks
from jboost.data import categorical as data_categorical, tabular
from jboost.losses import loss as loss_lib
from jboost.models import metadata
from jboost.trees import family, oblivious


CLASSIFICATION = ("binary", "multiclass")


# ---- The registry of model types (the classes model files name) ----------------------------

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
    """Register a model type (a NamedTuple class implementing :class:`Model`), which model files
    name by its class name. Usable as a class decorator; returns ``cls``.

    Raises:
      ValueError: another class of the same name is registered.
      TypeError: ``cls`` is not a NamedTuple class.
    """
    return _register(_MODEL_TYPES, cls, "model type")


def register_nested_type(cls: type) -> type:
    """Register a NamedTuple pytree class a model's fields hold (a stacked model's
    ``LinearModel``), so that model files can name it; as :func:`register_model_type`."""
    return _register(_NESTED_TYPES, cls, "nested type")


def model_types() -> Dict[str, type]:
    """The registered model types by class name (a copy)."""
    return dict(_MODEL_TYPES)


def nested_types() -> Dict[str, type]:
    """The registered nested pytree types by class name (a copy)."""
    return dict(_NESTED_TYPES)


class Members:
    """The members several model types share, written once; a model type takes those it names
    with :func:`model_type` (NamedTuple classes take no mixins)."""

    @property
    def n_features(self) -> int:
        """Features the trees split on (with categorical columns: the encoded features,
        :func:`jboost.data.categorical.encoded_names`; ``n_inputs`` columns are given)."""
        return self.borders.shape[-2]

    @property
    def n_inputs(self) -> int:
        """Columns of the rows to predict (:attr:`n_features` without categorical columns)."""
        return self.n_features if self.categorical is None else self.categorical.spec.n_inputs

    @property
    def n_outputs(self) -> int:
        return self.baseline.shape[-1]

    @property
    def n_rounds(self) -> int:
        return self.trees.features.shape[-3]

    @property
    def n_stages(self) -> int:
        return self.n_rounds

    @property
    def depth(self) -> int:
        return family.depth_of(self.trees)

    @property
    def task(self) -> str:
        return self.loss.task

    @property
    def class_axis(self) -> Optional[str]:
        """``"per_output"`` for ``K > 1`` outputs and one tree per output per round
        (``per_output_trees=True``: tree ``p`` is output ``p``), else ``None``."""
        if self.n_outputs > 1 and self.trees.features.shape[-2] == self.n_outputs:
            return "per_output"
        return None

    feature_names_in_ = metadata.FEATURE_NAMES_IN
    classes_ = metadata.CLASSES_


def model_type(*members: str):
    """A class decorator: :func:`register_model_type`, and the class takes the named
    :class:`Members`."""

    def decorate(cls: type) -> type:
        for name in members:
            setattr(cls, name, vars(Members)[name])
        return register_model_type(cls)

    return decorate


@runtime_checkable
class Model(Protocol):
    """What every fitted ensemble provides (docs/models.md, "The model protocol")."""

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
        constant + sum_t trees[t].leaf_values[leaf_t(x)]`` over the stages :func:`predict`
        uses (``offset`` may be ``None``; docs/models.md)."""

    # Optional members (proba, takes_base_margin, best_round, class_axis, no_tree_sum,
    # fine_tunable, the fit's metadata): docs/models.md, "The model protocol".


# ---- Sums of trees on host or device rows --------------------------------------------------


def sum_of_trees(trees: oblivious.ObliviousTrees, X) -> jax.Array:
    """Sum of every tree's leaf value for rows ``X (n, F)`` -> ``(n, K)``
    (:func:`jboost.trees.family.predict_raw`). Host rows go to one device (a model replicated on
    several is brought there too); column-major rows go feature-major, without a transposition."""
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
                 name: str = "n_rounds", lead: int = 0) -> oblivious.ObliviousTrees:
    """The trees of the first ``n_stages`` stages (axis ``lead``), checked against ``total``."""
    if n_stages is None:
        return trees
    n_stages = checks.check_int(n_stages, name, 0, total)
    return jax.tree_util.tree_map(lambda a: a[(slice(None),) * lead + (slice(0, n_stages),)], trees)


def kept_rounds(a, best, axis: int):
    """``a`` with zeros in the rounds (its axis ``axis``) after ``best`` (of shape
    ``a.shape[:axis]``: one best round per ensemble)."""
    keep = jnp.arange(a.shape[axis]) <= jnp.asarray(best)[..., None]
    keep = keep.reshape(keep.shape + (1,) * (a.ndim - keep.ndim))
    return jnp.where(keep, a, jnp.zeros((), a.dtype))


def used_rounds(trees, n_stages: Optional[int], best_round, lead: int = 0):
    """The trees a prediction uses (rounds on axis ``lead``, after ``lead`` ensemble axes): the
    first ``n_stages`` rounds; without ``n_stages`` and with early stopping, each ensemble's
    rounds up to its ``best_round`` (later rounds get zero leaf values; those after the last
    best round are dropped when ``best_round`` is concrete); else every round."""
    if n_stages is not None or best_round is None:
        return first_stages(trees, n_stages, trees.features.shape[lead], lead=lead)
    if not checks.is_traced(best_round):
        last = int(np.max(np.asarray(best_round), initial=-1)) + 1
        trees = jax.tree_util.tree_map(lambda a: a[(slice(None),) * lead + (slice(0, last),)], trees)
        if np.ndim(best_round) == 0:
            return trees
    return trees._replace(leaf_values=kept_rounds(trees.leaf_values, best_round, lead))


def add_round(acc, trees_m: oblivious.ObliviousTrees, X_t):
    """``acc`` plus the values of the trees of one round ``(T, ...)`` at rows ``X_t (F, n)``,
    tree by tree: the order of :func:`jboost.trees.family.predict_raw` (so bitwise equal)."""
    leaves = jax.vmap(lambda t: t.leaf_index_raw(X_t))(trees_m)
    values = jax.vmap(lambda t, leaf: t.leaf_values[leaf])(trees_m, leaves)
    for p in range(values.shape[0]):  # static: trees per round
        acc = acc + values[p]
    return acc


@functools.partial(_compile.jit, static_argnames=("fn", "raw_of", "bags"))
def staged_scan(rounds, X, fn, args, raw_of, consts, bags: Optional[str] = None):
    """``fn(raw_of(acc, stage, consts), *args)`` after every stage of ``rounds`` (a leading
    stage axis, then ``(T, ...)`` trees): one ``lax.scan`` whose ``acc`` sums the trees so far
    from 0 (:func:`add_round`), ``stage`` the 1-based stage (float32). ``bags``: ``None`` (one
    ensemble), ``"shared"`` (``B`` ensembles, trees ``(B, T, ...)`` per stage, on rows ``X``) or
    ``"own"`` (each ensemble on its own rows ``X (B, n, F)``)."""
    X_t = jnp.swapaxes(jnp.asarray(X, jnp.float32), -1, -2)
    add = add_round if bags is None else jax.vmap(
        add_round, in_axes=(0, 0, 0 if bags == "own" else None))
    lv = rounds.leaf_values
    lead = () if bags is None else (lv.shape[1],)

    def step(acc, xs):
        trees_m, stage = xs
        acc = add(acc, trees_m, X_t)
        return acc, fn(raw_of(acc, stage, consts), *args)

    acc0 = jnp.zeros(lead + (X_t.shape[-1], lv.shape[-1]), jnp.float32)
    stages = jnp.arange(1, lv.shape[0] + 1, dtype=jnp.float32)
    _, out = lax.scan(step, acc0, (rounds, stages))
    return out


def add_offset(raw, offset):
    """``raw + offset`` in the offset's dtype (a label offset, ``Booster.offset``, is added last)."""
    return raw if offset is None else raw.astype(offset.dtype) + offset


def require_classification(model, what: str) -> None:
    """Raise ``ValueError`` unless ``model`` is a classification model (``what``: the caller)."""
    if model.task not in CLASSIFICATION:
        name = getattr(getattr(model, "loss", None), "name", type(model).__name__)
        raise ValueError(f"{what} needs a classification model; {name!r} is a {model.task!r} model "
                         "(use jboost.predict for raw scores or jboost.predict_mean).")


# ---- The functions of the protocol ---------------------------------------------------------


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


def _rows_and_margin(model, X, base_margin, what: Optional[str] = None):
    """The checked model, rows and per-row offsets; ``what``: a caller needing classification."""
    check_model(model)
    if what is not None:
        require_classification(model, what)
    X = checked_rows(model, X)
    return X, _margin(model, base_margin, X.shape[0])


def _raw(model, X, n_rounds, base_margin=None, then=lambda raw: raw):
    """``then(raw scores)`` of the checked rows ``X`` (``(None, X)`` for zero rows), computed in
    row buckets (:func:`_by_row_buckets`)."""
    X, margin = _rows_and_margin(model, X, base_margin)
    if X.shape[0] == 0:
        return None, X
    return _by_row_buckets(model, X, margin, lambda X, margin: then(
        batched(model, lambda m: _plus(m.raw_scores(X, n_rounds), margin)))), X


def checked_rows(model, X, name: str = "X"):
    """Checked rows to predict: a DataFrame's columns matched by name (:func:`in_order`), with
    categorical columns encoded by the model's vocabularies; the column count checked."""
    X = in_order(model, X)
    cat = getattr(model, "categorical", None)
    if cat is None:
        return tabular.predict_matrix(X, model.n_features, name)
    return tabular.predict_matrix(data_categorical.categorical_rows(cat.spec, X, name),
                                      cat.spec.encoded_width, name)


def expanded_rows(model, X):
    """The float features ``(n, model.n_features)`` one model's trees split on, for rows ``X`` as
    users hold them (SHAP values and partial dependence read the trees directly)."""
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


# Host rows are predicted in a few fixed batch sizes (buckets), so that a new row count does not
# compile the prediction again: at most 8 sizes per octave, the smallest SMALLEST_BUCKET rows.
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
    """``fn(X, margin)`` (rows after the model's batch axes) on bucketed row counts
    (:func:`row_parts`) for host rows, the padded rows' results dropped (the same bit for bit);
    device rows, and the rows of a traced model, are passed as they are."""
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
    """The last dimension of ``fn(one model, rows)``, from shapes alone (``jax.eval_shape``), for
    the empty result of predicting zero rows."""
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
      base_margin: the rows' raw-score offsets ``(n,)`` or ``(n, K)`` of a model fitted with
        ``base_margin=``, added to its raw scores.
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
    """Class probabilities ``(n, n_classes)`` (classification models; arguments as
    :func:`predict`): the model's ``proba`` where it has one, else ``proba_from_raw``."""
    X, margin = _rows_and_margin(model, X, base_margin, "predict_proba")
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
    X, margin = _rows_and_margin(model, X, base_margin, "predict_class")
    if X.shape[0] == 0:
        empty = _empty(model, (), jnp.int32)
        return empty if getattr(model, "classes", None) is None else np.asarray(
            np.zeros(empty.shape, model.classes.array.dtype))
    idx = _by_row_buckets(model, X, margin, lambda X, margin: batched(
        model, lambda m: _classes(m, X, n_rounds, margin)))
    return metadata.labels_of(model, idx)


def _classes(m, X, n_rounds, margin):
    if hasattr(m, "proba"):
        return jnp.argmax(_proba(m, X, n_rounds, margin), axis=-1)
    return m.classes_from_raw(_plus(m.raw_scores(X, n_rounds), margin))


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
    for _ in model.batch_shape:
        fn = jax.vmap(fn)
    return fn(model, raw)


def staged_predict(model: Model, X, fn: Optional[Callable] = None, *args):
    """``fn(raw (n, K), *args)`` after every stage (boosting round, or tree of a forest), stacked
    ``(n_stages, ...)``, in one compiled ``lax.scan``: stage ``m`` sees exactly
    ``jboost.predict(model, X, n_rounds=m)``. ``fn`` must be hashable (a module-level function);
    default: the raw scores themselves."""
    check_model(model)
    if model.batch_shape:
        raise ValueError(f"staged_predict takes one model; this one has batch axes "
                         f"{model.batch_shape}: index it first (jax.tree_util.tree_map(lambda a: a[i], model)).")
    X = checked_rows(model, X)
    return model.staged(X, _identity if fn is None else fn, *args)


def _identity(raw):
    return raw


def used_gains(m) -> jax.Array:
    """The split gains of the rounds a prediction uses (with early stopping, the rounds after
    ``best_round`` count 0, as :func:`predict` drops them)."""
    gains, best = m.trees.gains, getattr(m, "best_round", None)
    return gains if best is None else kept_rounds(gains, best, jnp.ndim(best))


def feature_importance(model: Model, encoded: bool = False) -> metadata.Importance:
    """Total split gain per feature over the trees a prediction uses, normalised to sum to 1
    ``(n_features,)`` (batch axes in front); other kinds: :func:`jboost.inspect.importance`.
    A NumPy :class:`jboost.models.metadata.Importance` labelled with the model's feature names
    (``.names``, ``.as_dict()``) when it has them (under ``jit``/``vmap``: a JAX array).
    With categorical columns, one importance per input column (its encoded features' gains added
    up), or per encoded feature with ``encoded=True``."""
    check_model(model)

    def one(m):
        gains = used_gains(m).reshape(-1)
        feats = m.trees.features.reshape(-1)
        total = jax.ops.segment_sum(gains, feats, num_segments=m.n_features)
        if not encoded:
            total = data_categorical.sum_by_input(m, total)
        return total / jnp.maximum(jnp.sum(total), 1e-30)

    return metadata.importance_of(model, batched(model, one))
