"""fit_ecoc_boosters (Dietterich and Bakiri 1995): code matrices (exhaustive, random), the vmapped bit learners and their checkpointed chunks.

A ``(K, L)`` 0/1 code matrix gives each of the ``K`` classes a codeword of ``L`` bits; one
binary learner is fitted per bit, all ``L`` in one vmapped call with the per-bit labels as a
traced ``(L, n)`` array (:func:`fit_ecoc_binned`), and a row goes to the class whose codeword is
nearest to the predicted bits: L1 distance on the bits' probabilities (the default), or Hamming
distance on their signs (Allwein, Schapire and Singer 2000 for loss-based decoding).

* Codes: :func:`exhaustive_code` (every two-class split, ``3 <= K <= 11``), :func:`random_code`
  (the best of many random dense codes), :func:`min_row_distance`.
* Decoding: :func:`decode_l1`, :func:`decode_hamming`.
* The model: :class:`ECOCBoosters`, a :class:`jboost.models.base.Model` whose raw scores are the bits'
  log-odds ``(n, L)`` and whose classes are the nearest codewords (it has no class
  probabilities); :func:`fit_ecoc_boosters` (``verbose=True``: a progress line per chunk of
  bits, as forests print per chunk of trees).
* Lifecycle: ``init_model=`` (more rounds per bit, bitwise the longer fit), early stopping per bit
  on an ``eval_set`` (``best_round`` per bit), ``checkpoint_dir=`` and ``callbacks=`` per chunk of
  bits; ``base_margin`` is refused (:data:`NO_BASE_MARGIN`).
"""

from __future__ import annotations

import functools
import warnings
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from jboost import _compile
from jboost import _native
from jboost import checks
from jboost import devices
from jboost.data import labels
from jboost.data import tabular as tabular_lib
from jboost.engine import batching
from jboost.engine import boosting as boosting_lib
from jboost.engine import memory
from jboost.engine import state as state_lib
from jboost.fitting import init_model as init_model_lib
from jboost.fitting import prepare
from jboost.fitting import rounds
from jboost.fitting import settings
from jboost.fitting import tabular
from jboost.losses import baselines
from jboost.losses import per_sample
from jboost.models import ecoc
from jboost.trees import family

_D = settings.DEFAULTS


# --------------------------------------------------------------------------------------------
# Codes.
# --------------------------------------------------------------------------------------------


def exhaustive_code(n_classes: int) -> np.ndarray:
    """Dietterich and Bakiri's (1995) exhaustive code: ``(K, 2**(K-1) - 1)`` 0/1 int32.

    Class 0 is all ones; class ``c >= 1`` alternates runs of ``2**(K-1-c)`` zeros and ones.
    Every column is a distinct non-trivial two-class split and every pair of rows is
    ``2**(K-2)`` apart (Hamming). Practical for ``3 <= K <= 11``.
    """
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
    """Random dense code ``(K, L)`` 0/1 int32: the best of ``n_candidates`` Bernoulli(1/2) draws.

    A candidate is admissible when no column is constant (each bit is a real two-class
    problem) and no two columns are equal or complementary; among admissible candidates the one
    with the largest minimal row distance wins (Dietterich and Bakiri 1995, random codes;
    Allwein et al. 2000 draw many and keep the best).
    """
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
    """All ``L`` bit learners (binomial deviance boosting) in one call.

    Bit ``l`` is :func:`jboost.engine.boosting.boost` on labels ``code[y, l]`` (a row of the traced
    ``(L, n)`` label array) with key ``fold_in(key, l)``; bits are vmapped in chunks of
    ``chunk_size`` (:func:`jboost.engine.batching.map_in_chunks`); ``verbose``: a progress line as
    each chunk of bits finishes (not under ``jax.vmap``).

    ``start``: ``(trees (L, R, 1, ...), baselines (L, 1))`` of bit learners to continue (a warm
    start): bit ``l``'s raw scores are replayed from its trees (:func:`jboost.engine.boosting.resume`)
    and its rounds continue from round ``R``, so ``R`` rounds then ``n_rounds`` more equal
    ``R + n_rounds`` rounds bitwise.

    ``valid``: ``(X_valid (F, m) bins, y_valid, w_valid)``, the validation rows of every bit
    (bit ``l``'s labels ``code[y_valid, l]``): the score of ``config.early_stopping``, on which
    each bit stops on its own (:func:`jboost.engine.boosting.boost_until_stopped`; a chunk of bits runs
    until its last bit has stopped).

    Returns ``(trees (L, ...), baselines (L, 1))``; with ``config.early_stopping`` also each
    bit's ``best_round`` and rounds fitted ``n_fitted``, ``(L,)`` each (its rounds after the stop
    are zero trees).
    """
    one = _bit_fn(X_binned, y, w, key, hyper, code, config, start, valid)
    return batching.map_in_chunks(one, code.shape[1], chunk_size,
                                   progress="ecoc: bits" if verbose else None)


def _bit_fn(X_binned, y, w, key, hyper, code, config, start, valid):
    """The fit of bit ``l`` of :func:`fit_ecoc_binned`: ``l -> (trees, baseline[, best_round,
    n_fitted])``."""
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
    """The bits ``bits`` of :func:`fit_ecoc_binned` (one ``vmap``: a chunk of its ``lax.map``),
    run from the host (checkpoints, callbacks)."""
    return jax.vmap(_bit_fn(X_binned, y, w, key, hyper, code, config, start, valid))(bits)


CHECKPOINT_KIND = "ecoc"

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
      X: ``(n, F)``, or a pandas DataFrame, whose column names the model keeps
        (``ECOCBoosters.feature_names``: prediction from a DataFrame matches columns by name), as
        :func:`jboost.fit` does.
      y: ``(n,)`` class labels ``0..K-1``, or any others (strings, ``{-1, 1}``, ...) mapped to
        ``0..K-1`` in sorted order (class ``k`` is ``code[k]``) and kept in
        ``ECOCBoosters.classes`` (:func:`jboost.predict_class` returns them); the ``eval_set``'s
        labels are mapped with them.
      code: ``(K, L)`` 0/1 code matrix (:func:`exhaustive_code`, :func:`random_code`, or
        ``np.eye(K)`` for one-vs-rest).
      chunk_size: bits fitted together per ``vmap`` (default: all ``L`` in one).
      tree_family, max_leaves: every bit's trees, as :func:`jboost.fit`'s (static).
      verbose: print a line (bits done, elapsed and remaining time) as each chunk of bits is
        fitted, while the fit runs, as ``fit_forest(verbose=True)`` does (not under
        ``jax.vmap``); the model is bitwise that of a quiet fit.
      init_model: an :class:`ECOCBoosters` to continue (a warm start): ``n_rounds`` more rounds
        of every bit learner on the same rows, binned with its borders (the same ``code``,
        ``n_bins`` and ``depth``). Round ``m`` of bit ``l`` uses ``fold_in(fold_in(key, l), m)``,
        so ``r`` rounds then ``s`` more with the same key and settings equal ``r + s`` rounds
        bitwise. The result holds every round. A model fitted with early stopping is refused
        (its bits stopped at different rounds): fit it again with more ``n_rounds``.
      eval_set: ``(X_valid, y_valid)`` or ``(X_valid, y_valid, w_valid)`` with class labels: the
        validation rows of every bit learner (bit ``l``'s labels ``code[y_valid, l]``).
      early_stopping_rounds: each bit learner stops when its validation score has not improved
        (by more than ``early_stopping_tolerance``) for this many rounds, on its own, as
        :func:`jboost.fit` with that ``eval_set`` would (:func:`jboost.engine.boosting.boost_until_stopped`;
        a chunk of bits runs until its last bit has stopped). ``eval_metric``: the score of a bit
        (``None``: its binomial deviance; ``"error_rate"``, ``"mse"``, ``"mae"`` or
        ``metric(y, raw, w)`` on its 0/1 labels). The model records each bit's ``best_round``
        and predicts with its rounds ``0..best_round``; a concrete fit keeps the rounds up to
        the last bit's stop.
      checkpoint_dir: a directory where each chunk of bit learners is saved as it is fitted
        (``ecoc-chunk*.npz``, :func:`jboost.engine.batching.map_checkpointed`); rerunning the same fit
        (data, code, key, settings, ``chunk_size``) fits only the chunks not saved yet and gives
        bitwise the model of an uninterrupted fit (a killed fit resumes; another fit's files are
        refused, naming the file). The chunks then run as host-side calls of one compiled chunk
        program (as with ``callbacks``; not under ``jax.vmap``).
      callbacks: functions called after each chunk of bits with a dict (``bits``: the chunk's
        bit indices, ``done``/``items``: bits finished / ``L``, ``elapsed``,
        ``chunk``/``chunks``, ``from_checkpoint``; with early stopping ``best_round`` of the
        chunk's bits); returning ``True`` stops: the model keeps the bits fitted so far, with
        the code's first columns (a warning says so: fewer bits separate the classes less).
      base_margin: refused with a ``ValueError`` (:data:`NO_BASE_MARGIN` says why).
      Other arguments and their defaults as in :func:`jboost.fit` (binomial deviance per bit).

    A concrete fit (not under ``jax.vmap`` / ``jax.jit``) runs its chunks of bits as host-side
    calls of one compiled chunk program (bitwise the bits of one program), so ``Ctrl-C`` stops it
    at once; it raises ``KeyboardInterrupt`` (saying what was fitted and saved: with
    ``checkpoint_dir`` a rerun fits only the rest), since a model of a part of the code's bits
    would decode with a part of the code.

    Raises:
      MemoryError: the ``chunk_size`` bits fitted together (and every bit's trees) would not fit
        in the device's memory (:func:`jboost.engine.memory.check_boosting_memory`, before compiling).
    """
    if base_margin is not None:
        raise ValueError(NO_BASE_MARGIN)
    code = check_code(code)
    stopping = settings.check_early_stopping(early_stopping_rounds, early_stopping_tolerance,
                                                eval_metric, per_sample.binomial_deviance(),
                                                has_validation=eval_set is not None)
    config, hyper = settings.settings(n_rounds=n_rounds, depth=depth, n_bins=n_bins,
                                 learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
                                 min_child_weight=min_child_weight, subsample=subsample,
                                 colsample=colsample, colsample_by=colsample_by,
                                 row_sampler=row_sampler, tree_family=tree_family,
                                 max_leaves=max_leaves)
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
    # Traced hyperparameters (the caller's vmap) outside their bounds: a NaN model, and a warning.
    return settings.nan_outside_domains(model, None, hyper)


def _fit_bits_on_host(data, key, hyper, code_j, start, valid, config, chunk_size, init_model, *,
                      checkpoint_dir, verbose, callbacks):
    """A concrete fit's chunks of bit learners as host-side calls of one compiled chunk program
    (:func:`jboost.engine.batching.map_checkpointed`: checkpoints, progress, callbacks);
    returns ``(out, code, init_model)``, cut to the bits fitted when a callback stopped."""
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
