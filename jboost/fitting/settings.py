"""Every setting of the fit entry points, declared once (:data:`SETTINGS`) and given to each
entry point by :func:`takes_settings`; their host and traced checks. See docs/fitting.md."""

from __future__ import annotations

import functools
import inspect
import numbers
import re
import sys
import textwrap
import warnings
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from jboost import _compile, checks
from jboost.data import binning, categorical, categorical_stats
from jboost.engine import (algorithm as algorithm_lib, boosting as boosting_lib, distributed,
                           samplers)
from jboost.losses import loss as loss_lib, metrics
from jboost.models import metadata
from jboost.trees import (depthwise, interactions, lossguide, monotone, oblivious, registry,
                          splits as splits_lib)

MAX_DEPTH = 16
#: Depth-wise forests' trees (node tables grown by the CPU kernel over their non-empty nodes).
MAX_DEPTHWISE_DEPTH = 30
MAX_ROUNDS = 10**7

#: How a setting enters the compiled program: static (a new value compiles again), traced (an
#: array argument ``jax.vmap`` may batch), data (checked and binned on the host), or host-side.
STATIC, TRACED, DATA, HOST = "static", "traced", "data", "host"


class Ints(NamedTuple):
    """The domain of an integer setting: ``lo <= v <= hi`` (a Python int)."""

    lo: int
    hi: int

    def check(self, v, name: str):
        return checks.check_int(v, name, self.lo, self.hi)


class Reals(NamedTuple):
    """The domain of a real setting: ``[lo, hi]`` (``(lo, hi]`` when ``lo_open``); tracers pass."""

    lo: float
    hi: float
    lo_open: bool = False

    def check(self, v, name: str):
        checks.check_real(v, name, self.lo, self.hi, lo_open=self.lo_open)
        return v


class Choice(NamedTuple):
    """The domain of a setting that names one of ``options``."""

    options: tuple

    def check(self, v, name: str):
        return checks.check_choice(v, name, self.options)


class Verbosity(NamedTuple):
    """The domain of ``verbose``: a bool, or an int >= 0 (every that many rounds; 0: silent)."""

    def check(self, v, name: str):
        if isinstance(v, (bool, np.bool_)):
            return bool(v)
        what = (f"{name} must be a bool or an int >= 0 (a progress line every {name} rounds; "
                f"True: the entry point's default, 0 or False: none); got {v!r}.")
        if not isinstance(v, numbers.Integral):
            raise TypeError(what)
        if v < 0:
            raise ValueError(what)
        return int(v)


class Setting(NamedTuple):
    """One setting: ``name``, ``default``, ``kind`` (:data:`STATIC`, ...), ``doc`` (its ``Args``
    entry) and ``domain`` (``None``: checked where it is used)."""

    name: str
    default: Any
    kind: str
    doc: str
    domain: Any = None


#: Every setting of the fit entry points, a :class:`Setting` by name (declared once here).
SETTINGS = {s.name: s for s in (
    Setting("n_rounds", 100, STATIC,
            'boosting rounds (static).',
            domain=Ints(1, MAX_ROUNDS)),
    Setting("depth", 6, STATIC,
            'levels per oblivious tree, 1..16 (static; 2**depth leaves).'),
    Setting("learning_rate", 0.1, TRACED,
            'shrinkage (traced), or a callable ``round -> rate`` such as an optax schedule.',
            domain=Reals(0.0, np.inf, lo_open=True)),
    Setting('l2', 1.0, TRACED,
            'L2 penalty on leaf values, the lambda of ``-G / (H + lambda)`` (traced).',
            domain=Reals(0.0, np.inf)),
    Setting("min_split_gain", 0.0, TRACED,
            'a level is split only if its gain exceeds this (traced).',
            domain=Reals(0.0, np.inf)),
    Setting("min_child_weight", 1.0, TRACED,
            'minimal hessian sum of a child (traced; see :mod:`jboost.trees.splits`).',
            domain=Reals(0.0, np.inf)),
    Setting("subsample", 1.0, TRACED,
            'probability that a row takes part in a round (Bernoulli weights; traced).',
            domain=Reals(0.0, 1.0, lo_open=True)),
    Setting("colsample", 1.0, TRACED,
            'fraction of features eligible per tree or per level (traced).',
            domain=Reals(0.0, 1.0, lo_open=True)),
    Setting("colsample_by", 'tree', STATIC,
            '``"tree"``, ``"level"`` or a column sampler function (:mod:`jboost.engine.samplers`).',
            domain=Choice(tuple(samplers.COLUMN_SAMPLERS))),
    Setting("n_bins", 256, STATIC,
            'bins per feature including the missing bin, 3..256 (static).',
            domain=Ints(3, binning.MAX_BINS)),
    Setting("sample_weight", None, DATA,
            'optional non-negative ``(n_samples,)`` weights.'),
    Setting("eval_set", None, DATA,
            'optional ``(X_valid, y_valid)`` or ``(X_valid, y_valid, w_valid)``; its mean loss '
            'after every round is returned in ``Booster.valid_loss``.'),
    Setting("key", 0, TRACED,
            'an int seed in ``[0, 2**64)``, a ``jax.random.key`` or a legacy ``jax.random.PRNGKey``; '
            'the same key, data, settings and device give bitwise the same model (an int outside '
            'that range raises: it would collide with another seed).'),
    Setting("n_outputs", None, STATIC,
            'number of raw outputs K for a custom loss (built-ins know theirs; K-class losses infer '
            'K from the labels).'),
    Setting("task", None, STATIC,
            'for a custom loss: ``"regression"``, ``"binary"``, ``"multiclass"`` or ``"count"``.'),
    Setting("per_output_trees", False, STATIC,
            'with K outputs, fit K separate trees per round (ESL Algorithm 10.4) instead of one '
            'tree with vector leaves.'),
    Setting("borders", None, DATA,
            'precomputed ``(n_features, n_bins - 1)`` borders (from :func:`jboost.compute_borders`) '
            'to reuse a binning.'),
    Setting("devices", None, HOST,
            'data-parallel training: ``"all"``, a list of devices or a ``jax.sharding.Mesh`` '
            'whose first axis the rows are sharded over; ``None`` (default): one device.'),
    Setting("row_sampler", 'bernoulli', STATIC,
            '``"bernoulli"`` (each row kept with probability ``subsample``), ``"poisson"`` (a '
            'bootstrap per round) or a function (:mod:`jboost.engine.samplers`).',
            domain=Choice(tuple(samplers.ROW_SAMPLERS))),
    Setting("split_criterion", splits_lib.NEWTON, STATIC,
            'how splits are scored and leaves valued, a :class:`jboost.trees.splits.SplitCriterion` '
            '(static); default the regularised Newton criterion.'),
    Setting("tree_family", "oblivious", STATIC,
            'the trees to grow (static): ``"oblivious"`` (the default), ``"depthwise"``, '
            '``"lossguide"`` (best-first) or a :class:`jboost.trees.family.TreeFamily` class.'),
    Setting("max_leaves", None, STATIC,
            'loss-guided trees only (static): the most leaves of a tree (default 31); ``depth`` '
            'is then a bound up to 30, or ``None``.'),
    Setting("monotone_constraints", None, STATIC,
            'a sign per feature, ``+1`` (raw scores never decrease in it), ``-1`` (never increase) '
            'or ``0``, as a sequence or a dict of column names or indices to signs; enforced '
            'exactly (every built-in tree family; :mod:`jboost.trees.monotone`, '
            'docs/guide/constraints.md).'),
    Setting("interaction_constraints", None, STATIC,
            'a list of feature groups (indices, or column names), e.g. ``[[0, 1], [2, 3, 4]]``: the '
            'features of one root-to-leaf path are one feature alone or inside one group (XGBoost\'s '
            'definition; every tree family; :mod:`jboost.trees.interactions`, '
            'docs/guide/constraints.md).'),
    Setting("early_stopping_rounds", None, STATIC,
            'stop when the ``eval_set`` score has not improved (by more than '
            '``early_stopping_tolerance``) for this many rounds; the model keeps ``best_round``, '
            'which predictions use.',
            domain=Ints(1, MAX_ROUNDS)),
    Setting("early_stopping_tolerance", 0.0, STATIC,
            'the least decrease of the score that counts as an improvement.',
            domain=Reals(0.0, np.inf)),
    Setting("eval_metric", None, STATIC,
            'the early-stopping score, else a validation metric shown and given to callbacks '
            '(needs ``eval_set``): ``None`` (the loss), ``"error_rate"``, ``"mse"``, ``"mae"`` or '
            'a static ``metric(y, raw, w)`` (minimised).'),
    Setting("init_model", None, DATA,
            'a :class:`Booster` to continue: ``n_rounds`` more rounds on its binning; ``r`` '
            'rounds then ``s`` more equal ``r + s`` rounds bitwise.'),
    Setting("verbose", 0, HOST,
            'print the round, the losses, the eval metric, the best round and the elapsed and '
            'remaining time every ``verbose`` rounds (a bool or an int >= 0).',
            domain=Verbosity()),
    Setting("callbacks", (), HOST,
            'functions called on the host after every chunk of rounds with a dict of the '
            'progress; one returning ``True`` stops the fit.'),
    Setting("checkpoint_dir", None, HOST,
            'a directory where the model so far is saved (``checkpoint.jbm``) every '
            '``checkpoint_every`` rounds; a rerun of the same fit continues from it, bitwise.'),
    Setting("checkpoint_every", None, HOST,
            'rounds between checkpoints (default: ``verbose``, else a twentieth of ``n_rounds``).'),
    Setting("base_margin", None, DATA,
            "per-row offsets of the raw scores, ``(n_samples,)`` or ``(n_samples, K)`` (XGBoost's "
            '``base_margin``); the model does not store them: pass them to :func:`jboost.predict` '
            'too.'),
    Setting("eval_base_margin", None, DATA,
            "the offsets of ``eval_set``'s rows (required with ``base_margin`` and an "
            '``eval_set``).'),
    Setting("cat_features", None, DATA,
            "the categorical columns: ``None`` (a DataFrame's category, object and string "
            'columns), names, indices or a boolean mask; ``[]``: none.'),
    Setting("one_hot_max_size", categorical.ONE_HOT_MAX_SIZE, STATIC,
            'columns with at most this many categories (missing counted) become 0/1 indicators '
            "(splits ``x == c``); larger ones get CatBoost's ordered target statistics (static)."),
    Setting("cat_prior", None, TRACED,
            'the prior ``p`` of the target statistics, a number or ``(K,)`` (traced); default the '
            "training rows' weighted mean of the statistic (the positive rate)."),
    Setting("cat_prior_weight", categorical_stats.PRIOR_WEIGHT, TRACED,
            'its weight ``a > 0`` in ``(sum + a p) / (count + a)`` (traced).'),
    Setting("rows", 'global', HOST,
            '``"global"`` (default: every process passes the whole data) or ``"local"`` (each '
            'process of a multi-process fit passes its own rows; '
            ':mod:`jboost.engine.distributed`).',
            domain=Choice(distributed.ROWS)),

)}

# Shared defaults of the boosting entry points (the algorithms and forests differ: docs/fitting.md).
DEFAULTS = {name: SETTINGS[name].default for name in (
    "n_rounds", "depth", "learning_rate", "l2", "min_split_gain", "min_child_weight", "subsample",
    "colsample", "colsample_by", "n_bins")}

#: The traced (continuous) hyperparameters of a boosting fit.
HYPERPARAMETERS = ("learning_rate", "l2", "min_split_gain", "min_child_weight", "subsample",
                   "colsample")

#: The domain of every continuous hyperparameter, by name: ``(low, high, low end open)``.
BOUNDS = {name: tuple(SETTINGS[name].domain) for name in HYPERPARAMETERS}


def check_setting(name: str, v):
    """``v`` checked against the domain of setting ``name``; the value as used."""
    return SETTINGS[name].domain.check(v, name)


def takes_settings(**defaults):
    """Decorator of an entry point whose keyword-only parameters without a default are settings:
    each takes its declared default (or the one in ``defaults``), and the docstring's ``Args``
    gets the declared documentation of every parameter it does not document itself. The
    function, its ``__kwdefaults__`` filled, is called by a thin wrapper that first refuses a
    call under ``jax.jit`` (:func:`refuse_jit`) and checks the host settings given
    (docs/fitting.md)."""

    def decorate(fn):
        kwdefaults = dict(fn.__kwdefaults__ or {})
        params = inspect.signature(fn).parameters.values()
        for p in params:
            if p.kind is p.KEYWORD_ONLY and p.default is p.empty and (p.name in defaults
                                                                     or p.name in SETTINGS):
                kwdefaults[p.name] = defaults[p.name] if p.name in defaults else SETTINGS[p.name].default
        fn.__kwdefaults__ = kwdefaults
        fn.__doc__ = _args_doc(fn.__doc__ or "", [p.name for p in params])
        @functools.wraps(fn)
        def entry_point(*args, **kwargs):
            refuse_jit(entry_point)
            for name, v in kwargs.items():
                setting = SETTINGS.get(name)
                if setting is not None and setting.kind == HOST and setting.domain is not None:
                    setting.domain.check(v, name)
            return fn(*args, **kwargs)

        return entry_point

    return decorate


def under_jit() -> bool:
    """Whether the caller is being traced by ``jax.jit`` (or ``jax.eval_shape``): there every
    array operation is staged, even on concrete values (under ``jax.vmap`` alone they are not)."""
    if _compile.top_level():  # no trace at all (the probe below would compile a program)
        return False
    return checks.is_traced(jax.lax.add(np.int32(0), np.int32(0)))


def _public_name(fn) -> str:
    """Where users find ``fn``: ``jboost.<name>``, its subpackage's name, else its module's."""
    for module in ("jboost", ".".join(fn.__module__.split(".")[:2]), fn.__module__):
        if getattr(sys.modules.get(module), fn.__name__, None) is fn:
            return f"{module}.{fn.__name__}"
    return f"{fn.__module__}.{fn.__name__}"


def refuse_jit(fn) -> None:
    """Refuse a fit entry point ``fn`` called under ``jax.jit`` (its binning needs concrete
    values) with a ``TypeError`` saying what is jittable instead."""
    if under_jit():
        raise TypeError(
            f"{_public_name(fn)} is not jittable: it bins the data on the host (NumPy) and "
            "compiles its own programs, so it cannot run inside jax.jit (or jax.eval_shape). "
            "Call it outside jit; what is traceable: jax.vmap over traced hyperparameters with "
            "concrete data, e.g. jax.vmap(lambda lr: jboost.fit(X, y, learning_rate=lr))(rates) "
            "(or jboost.sweep.sweep: docs/sweeps.md), and jboost.predict(model, X) under "
            "jax.jit.")


_NAMES = re.compile(r"^\*{0,2}\w+(?:, \*{0,2}\w+)*$")


def _args_doc(doc: str, names) -> str:
    """``doc`` with its ``Args`` section (made when it has none) listing every parameter of
    ``names`` in order: its own entry (which may name several) or the declared one."""
    lines = doc.split("\n")
    head = [i for i, line in enumerate(lines) if line.strip() == "Args:"]
    if head:
        indent = lines[head[0]][:len(lines[head[0]]) - len(lines[head[0]].lstrip())]
        start = end = head[0] + 1
        while end < len(lines) and (lines[end].startswith(indent + "  ") or not lines[end].strip() and
                                    end + 1 < len(lines) and lines[end + 1].startswith(indent + "  ")):
            end += 1
    else:
        ends = [i for i, line in enumerate(lines) if line.strip() in ("Returns:", "Raises:")]
        indent = "    "
        start = end = ends[0] if ends else len(lines)
        lines[start:start] = [indent + "Args:", ""] if ends else ["", indent + "Args:"]
        start = end = start + 1
    own = _entries(lines[start:end], indent + "  ")
    body, used = [], set()
    for name in names:
        key = next((k for k in own if name in k), None)
        if key is not None and key not in used:
            used.add(key)
            body += own[key]
        elif key is None and name in SETTINGS:
            body += textwrap.wrap(f"{name}: {SETTINGS[name].doc}", 100 - len(indent) - 2,
                                  initial_indent=indent + "  ", subsequent_indent=indent + "    ",
                                  break_long_words=False, break_on_hyphens=False)
    body += [line for k in own if k not in used for line in own[k]]
    return "\n".join(lines[:start] + body + lines[end:])


def _entries(lines, indent: str) -> dict:
    """The entries of an ``Args`` section, ``{(name, ...): lines}`` in order."""
    entries, cur = {}, None
    for line in lines:
        if line.startswith(indent) and line[len(indent):len(indent) + 1].strip():
            cur = [line]
            entries[len(entries)] = cur
        elif cur is not None:
            cur.append(line)
    named = {}
    for i, body in entries.items():
        text = " ".join(line.strip() for line in body)
        names = text.split(":", 1)[0] if ":" in text else ""
        key = tuple(n.strip().lstrip("*") for n in names.split(",")) if _NAMES.match(names) else (i,)
        named[key] = body
    return named


def check_early_stopping(rounds, tolerance, metric, loss, *, has_validation: bool,
                         needs: str = "eval_set=(X_valid, y_valid)"):
    """The static :class:`jboost.engine.boosting.EarlyStopping` of the early-stopping settings
    (``None`` without ``rounds``); ``needs`` names the validation rows an entry point takes."""
    if tolerance is None or isinstance(tolerance, bool):
        raise TypeError(f"early_stopping_tolerance must be a real number >= 0; got {tolerance!r}.")
    check_setting("early_stopping_tolerance", tolerance)
    if rounds is None:
        if metric is not None:
            raise ValueError("eval_metric is the early-stopping score: pass early_stopping_rounds too.")
        if float(tolerance) != 0.0:
            raise ValueError(f"early_stopping_tolerance={tolerance} needs early_stopping_rounds: "
                             "pass early_stopping_rounds= too (or drop the tolerance).")
        return None
    rounds = check_setting("early_stopping_rounds", rounds)
    if not has_validation:
        raise ValueError(f"early_stopping_rounds needs {needs}: the rounds stop on its score.")
    metrics.check_metric(metric, loss, name="eval_metric")
    return boosting_lib.EarlyStopping(rounds=rounds, tolerance=float(tolerance), metric=metric)


def early_stopping(rounds, tolerance, metric, loss, *, has_validation: bool):
    """``(EarlyStopping or None, shown metric or None)`` of an entry point's early-stopping
    settings: ``metric`` is the stopping score with ``rounds``, else only shown and given to
    the callbacks (:func:`check_eval_metric`)."""
    stopping = check_early_stopping(rounds, tolerance, None if rounds is None else metric, loss,
                                    has_validation=has_validation)
    if rounds is not None:
        return stopping, None
    return stopping, check_eval_metric(metric, loss, has_validation=has_validation)


def refuse_local_rows(who: str, given=(), cat_features=None, loss=None) -> None:
    """Refuse what ``who`` (e.g. ``"fit_forest with rows='local' does"``) does not support yet
    with ``rows="local"``: the arguments named in ``given``, categorical columns, batch losses."""
    if given:
        raise ValueError(f"{who} not support {', '.join(k + '=' for k in given)} yet: fit with "
                         "rows='global' (every process passing the whole table) for them.")
    if cat_features is not None and not (np.ndim(cat_features) == 1 and len(cat_features) == 0):
        raise ValueError(f"cat_features: {who} not support categorical columns yet: encode them as "
                         "numbers (the same encoding on every process).")
    if isinstance(loss, loss_lib.Loss) and loss.batch:
        raise ValueError(f"loss: rows='local' does not support batch objectives ({loss.name!r}).")


def check_hyperparameter(name: str, v) -> None:
    """``v`` within the domain :data:`BOUNDS` of hyperparameter ``name``."""
    check_setting(name, v)


def _traced_contains(domain, x) -> jax.Array:
    """Traced :meth:`jboost.losses.Interval.contains` (``domain`` ``None``: finite only)."""
    x = jnp.asarray(x, jnp.float32)
    ok = jnp.isfinite(x)
    if domain is not None:
        ok &= (x > domain.lo) if domain.lo_open else (x >= domain.lo)
        ok &= (x < domain.hi) if domain.hi_open else (x <= domain.hi)
    return jnp.all(ok)


def _hyper_domains() -> dict:
    return {name: loss_lib.Interval(lo, hi, lo_open, False) for name, (lo, hi, lo_open) in BOUNDS.items()}


def in_domains(loss: Optional[loss_lib.Loss], hyper=None) -> jax.Array:
    """A traced boolean: every parameter of ``loss`` inside its declared domain and every
    hyperparameter of ``hyper`` (optional) inside :data:`BOUNDS`; the traced values' check."""
    ok = jnp.asarray(True)
    for name, value in ({} if loss is None else loss.params).items():
        ok &= _traced_contains(loss.domains.get(name), value)
    if hyper is not None:
        for name, domain in _hyper_domains().items():
            if getattr(hyper, name, None) is not None:
                ok &= _traced_contains(domain, getattr(hyper, name))
    return ok


def _report_outside(ok, params, hyper, *, loss_name: str, domains) -> None:
    """Host side of :func:`nan_outside_domains` (a ``jax.debug.callback``, one model's values)."""
    if bool(np.asarray(ok)):
        return
    bad = []
    for name, value in params.items():
        domain = domains.get(name)
        arr = np.asarray(value, np.float64)
        if not np.all(domain.contains(arr) if domain is not None else np.isfinite(arr)):
            bad.append(f"loss {loss_name!r} parameter {name}={arr.ravel()[0]:g} is not in "
                       f"{domain if domain is not None else '(-inf, inf)'}")
    for name, domain in _hyper_domains().items():
        if hyper is not None and name in hyper and not np.all(domain.contains(np.asarray(hyper[name]))):
            bad.append(f"{name}={float(np.asarray(hyper[name]).ravel()[0]):g} is not in {domain}")
    warnings.warn(f"{'; '.join(bad) or 'a traced setting is outside its domain'}: this fit's "
                  "results are NaN (a traced value, e.g. under "
                  "jax.vmap, is checked when the program runs instead of refused on the host); "
                  "use values inside the domain.", UserWarning, stacklevel=2)


def nan_outside_domains(values, loss: Optional[loss_lib.Loss], hyper=None, *, warn: bool = True):
    """``values`` (any pytree) with every floating leaf NaN when a traced parameter of ``loss``
    or hyperparameter of ``hyper`` is outside its domain (:func:`in_domains`), and with ``warn``
    a ``UserWarning`` naming it when the program runs; without a traced value, ``values``."""
    params = {} if loss is None else dict(loss.params)
    if not any(checks.is_traced(leaf) for leaf in jax.tree_util.tree_leaves((params, hyper))):
        return values
    ok = in_domains(loss, hyper)
    if warn:
        hyper_dict = None if hyper is None else {name: getattr(hyper, name) for name in BOUNDS
                                                 if getattr(hyper, name, None) is not None}
        jax.debug.callback(functools.partial(
            _report_outside, loss_name=None if loss is None else loss.name,
            domains=loss_lib.Domains() if loss is None else loss.domains), ok, params, hyper_dict)

    def mask(a):
        if isinstance(a, jax.Array) or isinstance(a, np.ndarray):
            if jnp.issubdtype(a.dtype, jnp.floating):
                return jnp.where(ok, a, jnp.nan).astype(a.dtype)
        return a

    return jax.tree_util.tree_map(mask, values)


def check_eval_metric(metric, loss: loss_lib.Loss, *, has_validation: bool,
                      needs: str = "eval_set=(X_valid, y_valid)"):
    """``eval_metric`` given without ``early_stopping_rounds`` (shown and given to callbacks
    only), checked; it needs the validation rows (``needs``)."""
    if metric is None:
        return None
    if not has_validation:
        raise ValueError(f"eval_metric={getattr(metric, '__name__', metric)!r} is computed on the "
                         f"validation rows: pass {needs}.")
    metrics.check_metric(metric, loss, name="eval_metric")
    return metric


def monotone_setting(constraints, config: boosting_lib.BoostConfig, *, n_features: int, names,
                     spec=None, init_model=None) -> Optional[tuple]:
    """The static signs of ``monotone_constraints`` (:func:`jboost.trees.monotone.resolve`:
    ``None`` when none), refused where they are not enforced yet, each error naming the fix.
    With categorical columns (``spec``, a :class:`jboost.data.categorical.CategoricalSpec`), the
    constraints name the input columns and the signs returned are the encoded features'."""
    if spec is not None:
        n_features, names = spec.n_inputs, spec.names if spec.names is not None else names
    signs = monotone.resolve(constraints, n_features, names)
    if spec is not None:
        signs = spec.encoded_signs(signs)
    before = getattr(getattr(init_model, "settings", None), "arrays", {}).get("monotone_constraints")
    if signs is None:
        if before is not None:
            raise ValueError("init_model was fitted with monotone_constraints: pass the same "
                             "monotone_constraints to continue it (its new trees must keep them).")
        return None
    why = None
    if config.tree_family not in (oblivious.ObliviousTrees, depthwise.DepthwiseTrees,
                                  lossguide.LossGuidedTrees):
        why = (f"tree_family={config.tree_family.__name__}: the oblivious, depth-wise and "
               "loss-guided trees enforce them; fit one of those")
    elif config.split_criterion != splits_lib.NEWTON:
        why = "a custom split_criterion: they are enforced with the Newton criterion only"
    elif config.algorithm != algorithm_lib.NEWTON:
        why = "this algorithm: they are enforced by gradient boosting's Newton round only"
    if why is not None:
        raise ValueError(f"monotone_constraints are not supported with {why}.")
    if init_model is not None:
        if before is None or tuple(np.asarray(before).tolist()) != signs:
            raise ValueError("monotone_constraints differ from init_model's (a continued model "
                             "is monotone only if every tree is): pass the constraints it was "
                             "fitted with, or fit a new model.")
    return signs


def constraint_settings(monotone_constraints, interaction_constraints,
                         config: boosting_lib.BoostConfig, *, n_features: int, names,
                         spec=None, init_model=None) -> dict:
    """``{"monotone": ..., "interactions": ...}``, the :class:`BoostConfig` fields of a fit's
    ``monotone_constraints`` and ``interaction_constraints`` (:func:`monotone_setting`,
    :func:`interaction_setting`; ``spec``: the categorical columns' encoding, or ``None``)."""
    return dict(
        monotone=monotone_setting(monotone_constraints, config, n_features=n_features, names=names,
                                  spec=spec, init_model=init_model),
        interactions=interaction_setting(interaction_constraints, n_features=n_features,
                                         names=names, spec=spec, init_model=init_model))


def forest_constraints(monotone_constraints, interaction_constraints, *, n_features: int, names,
                       task: str, n_outputs: int, continuing: bool) -> tuple:
    """``(signs, groups)`` of a random forest's ``monotone_constraints`` and
    ``interaction_constraints``, each ``None`` when none; refused when continuing a forest.
    Signs apply to a regression forest's mean and to a two-class forest's probability of class 1
    (its trees fit the 0/1 target); ``K > 2`` class frequencies sum to 1: refused."""
    if continuing and (interaction_constraints is not None or monotone_constraints is not None):
        raise ValueError("continuing a forest with interaction_constraints or "
                         "monotone_constraints is not supported (a Forest does not record them): "
                         "fit a new forest with more n_trees.")
    groups = interaction_setting(interaction_constraints, n_features=n_features, names=names)
    signs = monotone.resolve(monotone_constraints, n_features, names)
    if signs is not None and task != "regression" and n_outputs != 2:
        raise ValueError(f"monotone_constraints are supported by regression and two-class forests "
                         f"(the probability of class 1); this forest has {n_outputs} classes, whose "
                         "frequencies sum to 1 and cannot all follow one sign: fit one forest per "
                         "class against the rest (a 0/1 target), or a boosted model "
                         "(jboost.fit), whose raw class scores each take the signs.")
    return signs, groups


def interaction_setting(constraints, *, n_features: int, names, spec=None,
                        init_model=None) -> Optional[tuple]:
    """The static groups of ``interaction_constraints``
    (:func:`jboost.trees.interactions.resolve`: ``None`` when none), the same as ``init_model``'s
    (a continued model keeps its trees' constraints). With categorical columns (``spec``), the
    groups name the input columns and the groups returned are of the encoded features."""
    if spec is not None:
        n_features, names = spec.n_inputs, spec.names if spec.names is not None else names
    groups = interactions.resolve(constraints, n_features, names)
    if spec is not None:
        groups = spec.encoded_groups(groups)
    before = getattr(getattr(init_model, "settings", None), "arrays", {}).get("interaction_constraints")
    if init_model is not None and getattr(init_model, "settings", None) is not None:
        theirs = None if before is None else interactions.from_table(before)
        if groups != theirs:
            raise ValueError("interaction_constraints differ from init_model's (a continued model "
                             "keeps them only if every tree does): pass the groups it was fitted "
                             "with (None if none), or fit a new model.")
    return groups


def recorded_settings(config: boosting_lib.BoostConfig, hyper: boosting_lib.Hyperparams, key, *,
                      init_rounds: int = 0, base_margin: bool = False,
                      categorical: Optional[categorical_stats.Categorical] = None) -> metadata.Settings:
    """The :class:`jboost.models.metadata.Settings` of a fit (``Booster.settings``): the traced
    hyperparameters as used, the static ones as int32 / bool arrays, the key's raw data and the
    names of the samplers, criterion, tree family and metric."""
    arrays = dict(hyper._asdict())
    names = {"colsample_by": _name(config.colsample_by), "row_sampler": _name(config.row_sampler),
             "split_criterion": str(config.split_criterion.name),
             "tree_family": config.tree_family.__name__}
    if config.max_leaves is not None:
        arrays["max_leaves"] = checks.device_array(config.max_leaves, np.int32)
    if config.monotone is not None:
        arrays["monotone_constraints"] = checks.device_array(config.monotone, np.int32)
    if config.interactions is not None:
        arrays["interaction_constraints"] = checks.device_array(
            interactions.as_table(config.interactions), np.int32)
    if config.learning_rate_schedule is not None:  # the traced rate is then 1 (a multiplier)
        del arrays["learning_rate"]
        names["learning_rate_schedule"] = _name(config.learning_rate_schedule)
    key = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    i32, flag = (lambda v: checks.device_array(v, np.int32)), (lambda v: checks.device_array(v, np.bool_))
    arrays.update(n_rounds=i32(config.n_rounds), init_rounds=i32(init_rounds),
                  depth=i32(config.depth), n_bins=i32(config.n_bins),
                  per_output_trees=flag(config.per_output_trees),
                  base_margin=flag(base_margin), key=checks.device_array(key, np.uint32))
    if categorical is not None:  # the prior as used (traced), the one-hot threshold
        arrays.update(cat_prior=categorical.prior, cat_prior_weight=categorical.prior_weight,
                      one_hot_max_size=jnp.int32(categorical.spec.one_hot_max_size))
    es = config.early_stopping
    if es is not None:
        arrays.update(early_stopping_rounds=jnp.int32(es.rounds),
                      early_stopping_tolerance=jnp.float32(es.tolerance))
        names["eval_metric"] = metrics.metric_name(es.metric)
    elif config.eval_metric is not None:  # shown and given to callbacks, not a stopping score
        names["eval_metric"] = metrics.metric_name(config.eval_metric)
    return metadata.Settings(arrays, names)


def _name(x) -> str:
    """A setting's name: the string itself, or a function's ``__name__``."""
    return x if isinstance(x, str) else str(getattr(x, "__name__", type(x).__name__))


#: The arguments of :func:`settings` that every boosting entry point passes on as it got them.
BOOST_ARGS = ("n_rounds", "depth", "n_bins", "learning_rate", "l2", "min_split_gain",
              "min_child_weight", "subsample", "colsample", "colsample_by", "tree_family",
              "max_leaves")


def settings_of(args, **more):
    """:func:`settings` of an entry point's arguments ``args`` (a mapping: its ``locals()``), with
    the ``more`` settings it takes beyond :data:`BOOST_ARGS`."""
    return settings(**{name: args[name] for name in BOOST_ARGS}, **more)


def settings(*, n_rounds, depth, n_bins, learning_rate, l2, min_split_gain, min_child_weight,
             subsample, colsample, colsample_by="tree", per_output_trees=False,
             row_sampler="bernoulli", algorithm: Optional[algorithm_lib.Algorithm] = None,
             split_criterion: splits_lib.SplitCriterion = splits_lib.NEWTON,
             tree_family: type = oblivious.ObliviousTrees, max_leaves: Optional[int] = None):
    """Check the boosting settings; returns ``(BoostConfig (static), Hyperparams (traced))``.

    A callable ``learning_rate`` is the static ``learning_rate_schedule`` (the traced rate is 1).
    Loss-guided trees take ``max_leaves`` and ``depth`` as a bound up to
    :data:`MAX_DEPTHWISE_DEPTH` (``None``: ``max_leaves - 1``)."""
    n_rounds = check_setting("n_rounds", n_rounds)
    families = registry.TREE_FAMILIES
    if isinstance(tree_family, str):  # the built-in families by name
        if tree_family not in families:
            raise ValueError(f"tree_family must be \"oblivious\", \"depthwise\", \"lossguide\" or "
                             f"a class implementing jboost.trees.family.TreeFamily; got {tree_family!r}.")
        tree_family = families[tree_family]
    if tree_family is families["lossguide"]:
        max_leaves = checks.check_int(
            lossguide.DEFAULT_MAX_LEAVES if max_leaves is None else max_leaves, "max_leaves", 2,
            lossguide.MAX_LEAVES)
        if depth is None:  # no bound but the leaves: a chain of max_leaves - 1 splits
            depth = min(max_leaves - 1, MAX_DEPTHWISE_DEPTH)
        depth = checks.check_int(depth, "depth", 1, MAX_DEPTHWISE_DEPTH)
    else:
        if max_leaves is not None:
            raise ValueError(f"max_leaves={max_leaves!r} bounds loss-guided trees only: pass "
                             "tree_family=\"lossguide\" with it, or leave max_leaves out (the "
                             "other families grow every level to depth).")
        if depth is None:
            raise ValueError("depth=None (no depth bound) is for loss-guided trees "
                             "(tree_family=\"lossguide\", bounded by max_leaves); pass an integer "
                             f"depth in [1, {MAX_DEPTH}].")
        depth = checks.check_int(depth, "depth", 1, MAX_DEPTH)
    n_bins = check_setting("n_bins", n_bins)
    schedule = None
    if callable(learning_rate):
        schedule, learning_rate = learning_rate, 1.0
    values = dict(learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
                  min_child_weight=min_child_weight, subsample=subsample, colsample=colsample)
    for name, v in values.items():
        check_hyperparameter(name, v)
    if not callable(colsample_by):
        check_setting("colsample_by", colsample_by)
    if not callable(row_sampler):
        check_setting("row_sampler", row_sampler)
    if not isinstance(split_criterion, splits_lib.SplitCriterion):
        raise TypeError(f"split_criterion must be a jboost.trees.splits.SplitCriterion(score, value), got "
                        f"{type(split_criterion).__name__}: write score(G, H, l2) and value(G, H, l2) "
                        "and pass SplitCriterion(score, value).")
    missing = [m for m in ("grow", "leaf_index_raw", "leaf_index_binned", "with_borders")
               if not isinstance(tree_family, type) or not callable(getattr(tree_family, m, None))]
    if missing:
        raise TypeError(f"tree_family must be \"oblivious\", \"depthwise\", \"lossguide\" or a "
                        f"class implementing jboost.trees.family.TreeFamily; {tree_family!r} lacks "
                        f"{', '.join(missing)}.")
    config = boosting_lib.BoostConfig(n_rounds=n_rounds, depth=depth, n_bins=n_bins,
                                  per_output_trees=bool(per_output_trees), colsample_by=colsample_by,
                                  learning_rate_schedule=schedule, row_sampler=row_sampler,
                                  algorithm=algorithm or algorithm_lib.NEWTON,
                                  split_criterion=split_criterion, tree_family=tree_family,
                                  max_leaves=max_leaves)
    return config, boosting_lib.Hyperparams.create(**values)
