"""fit_ecoc_boosters, error-correcting output codes (Dietterich and Bakiri 1995): code matrices
(exhaustive, random), the vmapped bit learners and their checkpointed chunks. See
docs/combine.md."""

from __future__ import annotations

import functools
import warnings
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from jboost import _compile, _native, checks, devices
from jboost.data import labels, tabular as tabular_lib
from jboost.engine import batching, boosting as boosting_lib, memory, state as state_lib
from jboost.fitting import init_model as init_model_lib, prepare, rounds, settings, tabular
from jboost.losses import baselines, per_sample
from jboost.models import ecoc
from jboost.trees import family


def exhaustive_code(n_classes: int) -> np.ndarray:
    """Dietterich and Bakiri's (1995) exhaustive code: ``(K, 2**(K-1) - 1)`` 0/1 int32, every
    column a distinct two-class split, rows ``2**(K-2)`` apart; ``3 <= K <= 11``."""
    k = checks.check_int(n_classes, "n_classes", 3, 11)
    j = np.arange(2 ** (k - 1) - 1)
    rows = [np.ones_like(j)] + [(j >> (k - 1 - c)) & 1 for c in range(1, k)]
    return np.stack(rows).astype(np.int32)


def min_row_distance(code) -> jax.Array:
    """Smallest Hamming distance between two codewords (rows) of ``code``."""
    code = jnp.asarray(code, jnp.int32)
    d = jnp.sum(code[:, None, :] != code[None, :, :], axis=-1)
    k = code.shape[0]
    return jnp.min(jnp.where(jnp.eye(k, dtype=bool), jnp.iinfo(jnp.int32).max, d))


def random_code(key, n_classes: int, n_bits: int, n_candidates: int = 200) -> jax.Array:
    """Random dense code ``(K, L)`` 0/1 int32: of ``n_candidates`` Bernoulli(1/2) draws without
    constant, equal or complementary columns, the one of largest minimal row distance
    (Dietterich and Bakiri 1995; Allwein et al. 2000)."""
    n_classes = checks.check_int(n_classes, "n_classes", 2, 1 << 20)
    n_bits = checks.check_int(n_bits, "n_bits", 1, 1 << 20)
    n_candidates = checks.check_int(n_candidates, "n_candidates", 1, 1 << 20)
    k, l = n_classes, n_bits
    devices.check_memory(
        n_candidates * (4 * k * l + 2 * k * l * l + k * k * l + 4 * k * k), what="random_code",
        cause=f"its {n_candidates} candidate codes are scored at once",
        detail=f"each compares its {n_bits} columns pairwise over {n_classes} classes (K x L x L) "
        "and its rows pairwise (K x K x L); use fewer n_candidates or n_bits")
    return _random_code(checks.as_key(key), n_classes, n_bits, n_candidates)


@functools.partial(_compile.jit, static_argnames=("n_classes", "n_bits", "n_candidates"))
def _random_code(key, n_classes: int, n_bits: int, n_candidates: int) -> jax.Array:
    draws = jax.random.bernoulli(key, 0.5, (n_candidates, n_classes, n_bits)).astype(jnp.int32)

    def score(c):
        col_sum = jnp.sum(c, axis=0)
        nonconstant = jnp.all((col_sum > 0) & (col_sum < n_classes))
        same = jnp.all(c[:, :, None] == c[:, None, :], axis=0)
        compl = jnp.all(c[:, :, None] != c[:, None, :], axis=0)
        off = ~jnp.eye(n_bits, dtype=bool)
        distinct = ~jnp.any((same | compl) & off)
        return jnp.where(nonconstant & distinct, min_row_distance(c), -1)

    scores = jax.vmap(score)(draws)
    best = jnp.argmax(scores)
    return draws[best]


def check_code(code) -> np.ndarray:
    """``code`` as a ``(n_classes >= 2, n_bits >= 1)`` 0/1 int32 host matrix."""
    arr = np.asarray(code)
    if arr.ndim != 2 or arr.shape[0] < 2 or arr.shape[1] < 1:
        raise ValueError(f"code must be a (n_classes >= 2, n_bits >= 1) 0/1 matrix; got shape {arr.shape}.")
    if not np.all(np.isin(arr, (0, 1))):
        raise ValueError(f"code must hold only 0 and 1; got values such as "
                         f"{np.unique(arr[~np.isin(arr, (0, 1))])[:5].tolist()}.")
    return arr.astype(np.int32)


def ecoc_targets(y, code) -> jax.Array:
    """``(L, n)`` 0/1 labels of the binary problems: bit ``l`` of row ``i`` is ``code[y_i, l]``."""
    return jnp.asarray(code, jnp.float32)[jnp.asarray(y).astype(jnp.int32)].T


@functools.partial(_compile.jit, static_argnames=("config", "chunk_size", "verbose"))
def fit_ecoc_binned(X_binned, y, w, key, hyper: boosting_lib.Hyperparams, code, *,
                    config: boosting_lib.BoostConfig, chunk_size: int, verbose: bool = False,
                    start=None, valid=None):
    """All ``L`` bit learners (binomial deviance boosting) in one call: bit ``l`` on labels
    ``code[y, l]`` with key ``fold_in(key, l)``, vmapped in chunks of ``chunk_size``.

    Args:
      start: ``(trees (L, R, 1, ...), baselines (L, 1))`` of bit learners to continue.
      valid: ``(X_valid (F, m) bins, y_valid, w_valid)``, for ``config.early_stopping``.

    Returns:
      ``(trees (L, ...), baselines (L, 1))``; with early stopping also ``best_round`` and
      ``n_fitted``, ``(L,)`` each.
    """
    one = _bit_fn(X_binned, y, w, key, hyper, code, config, start, valid)
    return batching.map_in_chunks(one, code.shape[1], chunk_size,
                                   progress="ecoc: bits" if verbose else None)


def _bit_fn(X_binned, y, w, key, hyper, code, config, start, valid):
    """The fit of bit ``l`` of :func:`fit_ecoc_binned`, as a function of ``l``."""
    bits = ecoc_targets(y, code)
    bits_valid = None if valid is None else ecoc_targets(valid[1], code)
    loss = per_sample.binomial_deviance()
    n_bits = code.shape[1]

    def one(l):
        yl = bits[l]
        if valid is None:
            data = state_lib.Data.train_only(X_binned, yl, w)
        else:
            data = state_lib.Data(X_binned, yl, w, valid[0], bits_valid[l], valid[2])
        if start is None:
            init = baselines.baseline(loss, yl, w)
            out = boosting_lib.boost(data, jax.random.fold_in(key, l), hyper, loss, init, config=config)
        else:
            i = jnp.minimum(l, n_bits - 1)  # the padding of the last chunk repeats the last bit
            trees, init = jax.tree_util.tree_map(lambda a: a[i], start)
            state = boosting_lib.resume(data, trees, init, loss, config)
            out = boosting_lib.boost(data, jax.random.fold_in(key, l), hyper, loss, init, config=config,
                                 state=state, first_round=start[0].features.shape[1])
        if config.early_stopping is not None:
            return out.trees, init, out.best_round, out.n_fitted
        return out.trees, init

    return one


@functools.partial(_compile.jit, static_argnames=("config",))
def _bits_chunk(X_binned, y, w, key, hyper, code, start, valid, bits, *, config):
    """The bits ``bits`` of :func:`fit_ecoc_binned` in one ``vmap``, run from the host."""
    return jax.vmap(_bit_fn(X_binned, y, w, key, hyper, code, config, start, valid))(bits)


CHECKPOINT_KIND = "ecoc"

#: The message of the ``ValueError`` :func:`fit_ecoc_boosters` raises for ``base_margin=``.
NO_BASE_MARGIN = (
    "fit_ecoc_boosters takes no base_margin: its learners fit the code's bits (two-class problems "
    "of groups of classes), whose log-odds no per-row offset of a class score determines. Put "
    "known offsets into the features, or fit jboost.fit(X, y, 'multinomial_deviance', "
    "base_margin=...) with one offset per class.")


@settings.takes_settings(verbose=False)
def fit_ecoc_boosters(X, y, code, *, n_rounds, depth, learning_rate, l2, min_split_gain,
                      min_child_weight, subsample, colsample, colsample_by, n_bins, sample_weight,
                      key, row_sampler, chunk_size: Optional[int] = None, verbose, init_model,
                      eval_set, early_stopping_rounds, early_stopping_tolerance, eval_metric,
                      checkpoint_dir, callbacks, base_margin, tree_family,
                      max_leaves) -> ecoc.ECOCBoosters:
    """Fit an ECOC multiclass model (Dietterich and Bakiri 1995) with boosted bit learners.

    Args:
      X: ``(n, F)``, or a pandas DataFrame whose column names the model keeps.
      y: ``(n,)`` class labels ``0..K-1`` (class ``k`` is ``code[k]``), or others, mapped to
        ``0..K-1`` in sorted order (``ECOCBoosters.classes``).
      code: ``(K, L)`` 0/1 code matrix (:func:`exhaustive_code`, :func:`random_code`, or
        ``np.eye(K)`` for one-vs-rest).
      chunk_size: bits fitted together per ``vmap`` (default: all ``L`` in one).
      verbose: print a line as each chunk of bits is fitted.
      init_model: an :class:`ECOCBoosters` (fitted without early stopping) to continue on the
        same rows.
      eval_set: validation rows with class labels, shared by every bit.
      early_stopping_rounds: each bit learner stops on its own validation score.
      checkpoint_dir: a directory where each chunk of bits is saved as it is fitted.
      callbacks: functions called after each chunk of bits with a dict; returning ``True``
        stops: the model keeps the bits fitted so far (with a warning).
      base_margin: refused (:data:`NO_BASE_MARGIN`).

    See docs/combine.md (warm start, early stopping, checkpoints, callbacks).

    Raises:
      MemoryError: the ``chunk_size`` bits fitted together would not fit in the device's memory.
    """
    if base_margin is not None:
        raise ValueError(NO_BASE_MARGIN)
    code = check_code(code)
    stopping = settings.check_early_stopping(early_stopping_rounds, early_stopping_tolerance,
                                                eval_metric, per_sample.binomial_deviance(),
                                                has_validation=eval_set is not None)
    config, hyper = settings.settings_of(locals(), row_sampler=row_sampler)
    n_bits = code.shape[1]
    chunk_size = n_bits if chunk_size is None else min(
        checks.check_int(chunk_size, "chunk_size", 1, 1 << 30), n_bits)
    tab = tabular.tabular(X, y, init_model=init_model, eval_set=eval_set,
                          loss="multinomial_deviance")
    X, y, eval_set = tab.X, tab.y, tab.eval_set
    if tab.classes is not None and len(tab.classes) != code.shape[0]:
        raise ValueError(f"y holds {len(tab.classes)} classes {list(tab.classes.labels)[:10]} (labels "
                         f"mapped to 0..K-1 in sorted order) but code has {code.shape[0]} rows, one "
                         "codeword per class: pass a code with a row per class.")
    borders = None if init_model is None else _check_init_ecoc(init_model, X, code, config)
    data = prepare.prepare(
        X, y, sample_weight=sample_weight, n_bins=config.n_bins, borders=borders, eval_set=eval_set,
        label_check=lambda v, name: labels.n_classes_of(v, code.shape[0], name))
    config = config._replace(missing=data.missing, early_stopping=stopping)
    memory.check_boosting_memory(
        data.X_binned.shape[1], data.X_binned.shape[0], config, per_sample.binomial_deviance(),
        n_models=n_bits, n_together=chunk_size, what="ECOC bit learners",
        fix="use a smaller chunk_size, depth or n_bins, or a code with fewer bits")
    code_j = jnp.asarray(code, jnp.int32)
    start = None if init_model is None else (init_model.trees, init_model.baseline)
    valid = None if eval_set is None else (data.X_valid, data.y_valid, data.w_valid)
    key = checks.as_key(key)
    if not rounds.host_fit(hyper, key) and checkpoint_dir is None and not callbacks:
        # Under the caller's jax.vmap / jit: one traced program (progress from inside it).
        out = fit_ecoc_binned(data.X_binned, data.y, data.w, key, hyper, code_j, config=config,
                              chunk_size=chunk_size, verbose=bool(verbose), start=start, valid=valid)
    else:
        out, code_j, init_model = _fit_bits_on_host(
            data, key, hyper, code_j, start, valid, config, chunk_size, init_model,
            checkpoint_dir=checkpoint_dir, verbose=verbose, callbacks=callbacks)
    trees, init = out[:2]
    best = None
    if stopping is not None:
        best, n_fitted = out[2:]
        if not checks.is_traced(n_fitted):  # keep the rounds up to the last bit's stop
            last = int(np.max(np.asarray(n_fitted)))
            trees = jax.tree_util.tree_map(lambda a: a[:, :last], trees)
    trees = family.with_borders(trees, data.borders)
    if init_model is not None:  # its rounds first, then the new ones (per bit)
        trees = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b], axis=1),
                                       init_model.trees, trees)
    model = ecoc.ECOCBoosters(trees, data.borders, init, code_j, best, classes=tab.classes,
                         feature_names=tab.feature_names)
    return settings.nan_outside_domains(model, None, hyper)


def _fit_bits_on_host(data, key, hyper, code_j, start, valid, config, chunk_size, init_model, *,
                      checkpoint_dir, verbose, callbacks):
    """A concrete fit's chunks of bit learners as host-side calls (checkpoints, progress,
    callbacks); ``(out, code, init_model)``, cut to the bits fitted when a callback stopped."""
    n_bits = code_j.shape[1]
    stopping = config.early_stopping

    def info(c, chunk):
        size = chunk[1].shape[0]
        bits = [b for b in range(c * size, (c + 1) * size) if b < n_bits]
        return ({"bits": bits} if stopping is None else
                {"bits": bits, "best_round": np.asarray(chunk[2])[:len(bits)]})

    try:
        out = batching.map_checkpointed(
            functools.partial(_bits_chunk, config=config),
            (data.X_binned, data.y, data.w, key, hyper, code_j, start, valid), n_bits, chunk_size,
            checkpoint_dir=checkpoint_dir, kind=CHECKPOINT_KIND,
            settings=(config, _native.available(), jax.devices()[0].platform),
            differs="data, code, key, settings or init_model", what="chunks of bits",
            progress="ecoc: bits" if verbose else None, callbacks=callbacks, info=info,
            at_once=True)
    except KeyboardInterrupt as e:  # no partial model: it would decode with a part of the code
        raise KeyboardInterrupt(f"{e} No model is returned: an ECOC model decodes every class "
                                "with every bit of its code (to keep the bits fitted so far, "
                                "stop from a callback instead).") from None
    if out[1].shape[0] < n_bits:  # a callback stopped: the bits fitted so far
        fitted = out[1].shape[0]
        warnings.warn(f"a callback stopped the fit after {fitted} of {n_bits} bits: the "
                      f"model decodes with the code's first {fitted} columns.", UserWarning,
                      stacklevel=3)
        code_j = code_j[:, :fitted]
        if init_model is not None:
            init_model = init_model._replace(
                trees=jax.tree_util.tree_map(lambda a: a[:fitted], init_model.trees))
    return out, code_j, init_model


def _check_init_ecoc(model, X, code: np.ndarray, config: boosting_lib.BoostConfig):
    """Check an ECOC model to continue (``init_model=``); returns the borders to bin with."""
    if not isinstance(model, ecoc.ECOCBoosters):
        raise TypeError(f"init_model must be ECOCBoosters fitted by combine.fit_ecoc_boosters; got "
                        f"{type(model).__name__}.")
    borders = init_model_lib.check_init_model(model, ecoc.ECOCBoosters, tabular_lib.as_matrix(X, "X").shape[1],
                                           None, n_bins=config.n_bins, depth=config.depth,
                                           who="combine.fit_ecoc_boosters", config=config)
    if model.code.shape != code.shape or not np.array_equal(np.asarray(model.code), code):
        raise ValueError(f"code differs from init_model's {tuple(model.code.shape)} code matrix: a "
                         "continued fit continues each bit's learner; pass init_model.code.")
    if model.best_round is not None:
        raise ValueError("init_model was fitted with early stopping: its bit learners stopped at "
                         "different rounds (each keeps zero trees after its stop), so no longer fit "
                         "continues it. Fit it again with more n_rounds (and early_stopping_rounds), "
                         "or continue a model fitted without early stopping.")
    return borders
