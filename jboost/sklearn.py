"""scikit-learn estimators over jboost: boosting (:func:`jboost.fit`), random forests
(:func:`jboost.bagging.fit_forest`) and bagged boosters (:func:`jboost.bagging.fit_bagged_boosters`),
each a scikit-learn estimator whose fitted jboost model is ``booster_``. An optional extra
(``pip install "jboost[sklearn]"``); ``import jboost`` does not import it. See docs/sklearn.md.
"""

from __future__ import annotations

import numbers
from typing import Optional

import numpy as np

try:
    import sklearn
    from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
    from sklearn.metrics import d2_pinball_score
    from sklearn.model_selection import train_test_split
    from sklearn.utils.multiclass import check_classification_targets
    from sklearn.utils.validation import _check_sample_weight, check_is_fitted, check_random_state
except ImportError as e:  # pragma: no cover - exercised without scikit-learn only
    raise ImportError('jboost.sklearn needs scikit-learn: pip install "jboost[sklearn]"') from e

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:  # pragma: no cover - older scikit-learn
    _validate_data = None

import jboost
from jboost import bagging
from jboost.data import categorical as categorical_lib
from jboost.losses import loss as loss_lib, multi_quantile, per_sample

__all__ = [
    "JBoostClassifier", "JBoostRegressor", "JBoostForestClassifier", "JBoostForestRegressor",
    "JBoostBaggingClassifier", "JBoostBaggingRegressor", "expected_failed_checks",
]

_WEIGHT_CHECK = "check_sample_weight_equivalence_on_dense_data"
#: Why the boosting estimators may fail :data:`_WEIGHT_CHECK` (docs/sklearn.md).
_FLOAT32_WEIGHTS = (
    "jboost fits in float32: integer sample weights give the fit on repeated rows (the same "
    "borders, baseline and splits, weight-sums of gradients and hessians), but sums of g*w and "
    "of w repeated g round differently (leaf values and predictions differ by ~1e-7 to 1e-6 "
    "relative; the check asks rtol=1e-7), and on the check's data (15 rows, 30 features, some "
    "of weight 0) many splits tie exactly, which that rounding breaks one way or the other")
#: Why the forests and bagged boosters fail :data:`_WEIGHT_CHECK` (docs/sklearn.md).
_BOOTSTRAP_WEIGHTS = (
    "a bootstrap draws rows: a row of weight 3 is one draw whose count is multiplied by 3, three "
    "repeated rows are three draws (scikit-learn's own forests and bagging declare this check "
    "too); and the bin borders are unweighted quantiles, as fit_forest and fit_bagged_boosters "
    "document")


def _validate(est, X, y="no_validation", reset: bool = True, **check_params):
    """scikit-learn's ``validate_data`` (>= 1.6; ``BaseEstimator._validate_data`` before), NaN
    allowed (jboost's missing value), dense numeric arrays."""
    if _validate_data is not None:
        return _validate_data(est, X, y, reset=reset, ensure_all_finite="allow-nan",
                              dtype="numeric", **check_params)
    return est._validate_data(X, y, reset=reset, force_all_finite="allow-nan",  # pragma: no cover
                              dtype="numeric", **check_params)


def _seed(random_state) -> int:
    """jboost's integer key: an int as it is, else drawn from ``check_random_state``."""
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return int(random_state)
    return int(check_random_state(random_state).randint(np.iinfo(np.int32).max))


def _merged(explicit: dict, fit_kwargs: Optional[dict], what: str) -> dict:
    """The explicit settings with ``fit_kwargs`` added; a key given twice is refused."""
    extra = dict(fit_kwargs or {})
    twice = sorted(set(extra) & set(explicit))
    if twice:
        raise ValueError(f"fit_kwargs sets {twice}, which are parameters of the estimator itself: "
                         f"set them directly (est.set_params(...)) rather than through fit_kwargs of {what}.")
    return {**explicit, **extra}


def expected_failed_checks(estimator) -> dict:
    """scikit-learn's checks that ``estimator`` (one of this module's) is expected to fail:
    ``{check_name: reason}``. For ``check_estimator(est, expected_failed_checks=
    expected_failed_checks(est))`` and ``parametrize_with_checks(estimators,
    expected_failed_checks=expected_failed_checks)`` (scikit-learn >= 1.6, whose tags hold no
    expected failures; before 1.6 the estimators' ``_xfail_checks`` tag says the same). The
    only one is ``check_sample_weight_equivalence_on_dense_data``: see docs/sklearn.md."""
    return dict(getattr(estimator, "_expected_failures", {}))


class _JBoostBase(BaseEstimator):
    """Shared fit/predict plumbing: validation, sample weights, the fitted model, importances."""

    _classifier = False
    #: scikit-learn's checks this estimator is expected to fail, with the reason
    #: (:func:`expected_failed_checks`).
    _expected_failures: dict = {}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # NaN is jboost's missing value
        return tags

    def _more_tags(self):  # pragma: no cover - scikit-learn < 1.6
        return {"allow_nan": True, "_xfail_checks": dict(self._expected_failures)}

    # ---- fit -------------------------------------------------------------------------------

    def fit(self, X, y, sample_weight=None, **fit_params):
        """Fit on ``X (n_samples, n_features)`` and ``y (n_samples,)``; NaN in ``X`` is missing.

        ``sample_weight``: optional non-negative ``(n_samples,)``. ``fit_params``: further
        keywords of the jboost fit function (an ``eval_set=(X_valid, y_valid[, w_valid])`` is
        validated like ``X`` and, for a classifier, its labels mapped as ``y``'s)."""
        if self._categorical(X):  # columns as they are: jboost.fit encodes them
            _validate(self, X, reset=True, skip_check_array=True)  # n_features_in_, feature_names_in_
            y = np.asarray(y) if self._classifier else np.asarray(y, dtype=np.float64)
        else:
            X, y = _validate(self, X, y, y_numeric=not self._classifier)
        self.__dict__.pop("best_round_", None)  # a previous fit's
        y = self._encode_targets(y)
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64)
        fit_params = dict(fit_params)
        if fit_params.get("eval_set") is not None and not isinstance(fit_params["eval_set"], str):
            fit_params["eval_set"] = self._validated_eval_set(fit_params["eval_set"])
        self.booster_ = self._fit_model(X, y, sample_weight, fit_params)
        return self

    def _categorical(self, X) -> bool:
        """Whether this fit has categorical columns (an estimator with ``cat_features``: the
        columns it names, else a DataFrame's category, object and string columns): they go to
        jboost as they are, which encodes them (:mod:`jboost.data.categorical`)."""
        if not hasattr(self, "cat_features"):
            return False
        return categorical_lib.has_categorical(X, self.cat_features)

    def _encode_targets(self, y):
        return y

    def _validated_eval_set(self, eval_set):
        if not isinstance(eval_set, (tuple, list)) or len(eval_set) not in (2, 3):
            raise ValueError("eval_set must be (X_valid, y_valid) or (X_valid, y_valid, w_valid); "
                             f"got {type(eval_set).__name__}.")
        X_v = self._rows(eval_set[0], fitting=True)
        y_v = self._encode_labels(eval_set[1]) if self._classifier else \
            np.asarray(eval_set[1], dtype=np.float64)
        return (X_v, y_v) + tuple(eval_set[2:])

    # ---- predict ---------------------------------------------------------------------------

    def _checked(self, X):
        check_is_fitted(self)
        return self._rows(X)

    def _rows(self, X, fitting: bool = False):
        """Rows to predict (or an ``eval_set``'s): scikit-learn's checks of the columns; a model
        with categorical columns takes them as they are (jboost matches them by name)."""
        encoded = self._categorical(X) if fitting else \
            getattr(self.booster_, "categorical", None) is not None
        if encoded:
            _validate(self, X, reset=False, skip_check_array=True)
            return X
        return _validate(self, X, reset=False)

    @property
    def feature_importances_(self) -> np.ndarray:
        """Total split gain per feature, normalised to sum 1 (all zeros when no tree splits)."""
        check_is_fitted(self)
        return np.asarray(jboost.feature_importance(self.booster_), dtype=np.float64)


class _ClassifierBase(ClassifierMixin, _JBoostBase):
    """Labels <-> 0..K-1 (``classes_``), ``predict`` / ``predict_proba``."""

    _classifier = True

    def _encode_targets(self, y):
        check_classification_targets(y)
        self.classes_, encoded = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(f"{type(self).__name__} needs samples of at least 2 classes in the "
                             f"data; got only one class: {self.classes_[0]!r}.")
        return encoded.astype(np.int32)

    def _encode_labels(self, labels) -> np.ndarray:
        """``labels`` (in ``classes_``) as ``0..K-1``; an unseen label is refused."""
        labels = np.asarray(labels).ravel()
        idx = np.searchsorted(self.classes_, labels)
        idx = np.minimum(idx, len(self.classes_) - 1)
        unseen = self.classes_[idx] != labels
        if np.any(unseen):
            raise ValueError(f"eval_set has labels not in the training labels: "
                             f"{np.unique(labels[unseen]).tolist()}; the classes are {self.classes_.tolist()}.")
        return idx.astype(np.int32)

    def _classification_kwargs(self, loss, kwargs):
        """The loss for K = ``len(classes_)`` classes and the keywords it needs: by default the
        binomial (K = 2) or multinomial deviance; a plain function gets ``task`` binary or
        multiclass (unless ``fit_kwargs`` says); a K-class loss gets ``n_outputs = K`` (not the
        labels' maximum + 1, which a held-out split or a bootstrap may lower)."""
        k = len(self.classes_)
        extra = {}
        if loss is None:
            loss = "binomial_deviance" if k == 2 else "multinomial_deviance"
        elif callable(loss) and not isinstance(loss, loss_lib.Loss) and "task" not in kwargs:
            extra["task"] = "binary" if k == 2 else "multiclass"
        if k > 2 and "n_outputs" not in kwargs:
            task = kwargs.get("task", extra.get("task"))
            if task is None and isinstance(loss, (str, loss_lib.Loss)):
                try:
                    task = per_sample.get(loss).task
                except ValueError:  # not a built-in name: jboost.fit says so
                    pass
            if task == "multiclass":
                extra["n_outputs"] = k
        return dict(kwargs, **extra), loss

    def _weighted_classes(self, y, sample_weight) -> None:
        """At least 2 classes keep a positive weight (else the fit has one class)."""
        if sample_weight is not None and np.unique(y[sample_weight > 0]).size < 2:
            raise ValueError(f"{type(self).__name__} needs samples of at least 2 classes with a "
                             "positive sample_weight; got one class after the weights.")

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities ``(n_samples, n_classes)``, columns in the order of ``classes_``."""
        X = self._checked(X)
        return np.asarray(jboost.predict_proba(self.booster_, X), dtype=np.float64)

    def predict(self, X) -> np.ndarray:
        """The most probable class of each row, as the original labels."""
        X = self._checked(X)
        return self.classes_[np.asarray(jboost.predict_class(self.booster_, X))]


# ---- Boosting: jboost.fit --------------------------------------------------------------------


class _BoostingBase(_JBoostBase):
    """The settings and fit of :func:`jboost.fit`, with early stopping on a held-out split."""

    _expected_failures = {_WEIGHT_CHECK: _FLOAT32_WEIGHTS}

    def __init__(self, loss=None, *, n_rounds=100, depth=6, learning_rate=0.1, l2=1.0,
                 min_split_gain=0.0, min_child_weight=1.0, subsample=1.0, colsample=1.0,
                 n_bins=256, random_state=None, early_stopping_rounds=None,
                 validation_fraction=0.1, cat_features=None, tree_family="oblivious",
                 max_leaves=None, monotone_constraints=None, interaction_constraints=None,
                 fit_kwargs=None):
        self.loss = loss
        self.cat_features = cat_features
        self.monotone_constraints = monotone_constraints
        self.interaction_constraints = interaction_constraints
        self.n_rounds = n_rounds
        self.depth = depth
        self.tree_family = tree_family
        self.max_leaves = max_leaves
        self.learning_rate = learning_rate
        self.l2 = l2
        self.min_split_gain = min_split_gain
        self.min_child_weight = min_child_weight
        self.subsample = subsample
        self.colsample = colsample
        self.n_bins = n_bins
        self.random_state = random_state
        self.early_stopping_rounds = early_stopping_rounds
        self.validation_fraction = validation_fraction
        self.fit_kwargs = fit_kwargs

    def _loss_and_kwargs(self, kwargs):
        return kwargs, "squared_error" if self.loss is None else self.loss

    def _fit_model(self, X, y, sample_weight, fit_params):
        seed = _seed(self.random_state)
        kwargs = _merged(dict(n_rounds=self.n_rounds, depth=self.depth,
                              learning_rate=self.learning_rate, l2=self.l2,
                              min_split_gain=self.min_split_gain,
                              min_child_weight=self.min_child_weight, subsample=self.subsample,
                              colsample=self.colsample, n_bins=self.n_bins, key=seed,
                              early_stopping_rounds=self.early_stopping_rounds,
                              cat_features=self.cat_features, tree_family=self.tree_family,
                              max_leaves=self.max_leaves,
                              monotone_constraints=self.monotone_constraints,
                              interaction_constraints=self.interaction_constraints),
                         self.fit_kwargs, "JBoost boosting estimators")
        kwargs, loss = self._loss_and_kwargs(kwargs)
        kwargs.update(fit_params)
        if self._classifier:
            self._weighted_classes(y, sample_weight)
        if self.early_stopping_rounds is not None and kwargs.get("eval_set") is None:
            X, y, sample_weight, kwargs = self._held_out(X, y, sample_weight, kwargs, seed)
        booster = jboost.fit(X, y, loss, sample_weight=sample_weight, **kwargs)
        if booster.best_round is not None:
            self.best_round_ = int(booster.best_round)
        return booster

    def _held_out(self, X, y, sample_weight, kwargs, seed):
        """Split off ``validation_fraction`` of the rows (seeded; stratified for a classifier
        where every class has 2 rows) as the early-stopping ``eval_set``."""
        n = X.shape[0]
        stratify = None
        if self._classifier and np.bincount(y).min() >= 2:
            stratify = y
        train, valid = train_test_split(np.arange(n), test_size=self.validation_fraction,
                                        random_state=seed, stratify=stratify)
        w = sample_weight
        take = (lambda rows: X.iloc[rows]) if hasattr(X, "iloc") else (lambda rows: X[rows])
        eval_set = (take(valid), y[valid]) if w is None else (take(valid), y[valid], w[valid])
        kwargs = dict(kwargs, eval_set=eval_set)
        margin = kwargs.get("base_margin")
        if margin is not None:
            margin = np.asarray(margin)
            kwargs.update(base_margin=margin[train], eval_base_margin=margin[valid])
        return take(train), y[train], None if w is None else w[train], kwargs

    def _staged_raw(self, X):
        """``(n_rounds, n_samples, K)`` raw scores after every fitted round (one scan)."""
        X = self._checked(X)
        return np.asarray(jboost.staged_predict(self.booster_, X))


class JBoostRegressor(RegressorMixin, _BoostingBase):
    """Gradient boosting of oblivious, depth-wise or loss-guided trees for regression (:func:`jboost.fit`).

    Parameters are those of :func:`jboost.fit` of the same names (``random_state`` is its
    ``key``); ``loss``: a built-in name (default ``"squared_error"``), a :class:`jboost.Loss`
    or a function ``loss(y, raw)`` of one sample. ``early_stopping_rounds``: stop when the score
    on a held-out ``validation_fraction`` of the rows (seeded by ``random_state``), or on the
    fit parameter ``eval_set``, has not improved for this many rounds; ``best_round_`` is then
    the best round, which predictions use. ``fit_kwargs``: any other keyword of
    :func:`jboost.fit` (e.g. ``{"colsample_by": "level", "eval_metric": "mae"}``).
    ``cat_features``: as :func:`jboost.fit`'s: ``None`` takes a DataFrame's category, object
    and string columns as categorical (one-hot or ordered target statistics), or name them;
    such rows go to jboost as they are (columns matched by name at predict time).
    ``tree_family``: ``"oblivious"`` (default), ``"depthwise"`` or ``"lossguide"`` (best-first
    trees of ``max_leaves`` leaves, default 31; ``depth`` then bounds their depth, ``None``: no
    bound but ``max_leaves``).

    ``predict`` is the loss's link of the raw score (:func:`jboost.predict_mean`: the value for
    squared error, the mean for Poisson; the ``(n_samples, K)`` quantiles for
    :func:`jboost.losses.quantiles`). ``score`` is the R^2 of ``predict``, or for the quantile
    losses (:func:`jboost.losses.quantile`, :func:`jboost.losses.quantiles`) the D^2 pinball score
    (:func:`sklearn.metrics.d2_pinball_score`: 1 minus the pinball loss over that of the
    labels' quantile) averaged over the levels, so model selection compares what the loss fits.

    Attributes:
      ``booster_``: the fitted :class:`jboost.Booster`.
      ``n_features_in_``: as in scikit-learn.
      ``feature_names_in_``: as in scikit-learn.
      ``feature_importances_``: total split gain per feature, normalised to sum 1.
      ``best_round_``: with early stopping, the round of the best validation score.
    """

    def predict(self, X) -> np.ndarray:
        X = self._checked(X)
        return np.asarray(jboost.predict_mean(self.booster_, X), dtype=np.float64)

    def score(self, X, y, sample_weight=None) -> float:
        """R^2 of :meth:`predict`; for a quantile loss, the mean over its levels of the D^2
        pinball score (1 is perfect, 0 the labels' quantile, negative worse)."""
        levels = multi_quantile.levels_of(self.booster_.loss)
        if levels is None:
            return super().score(X, y, sample_weight=sample_weight)
        q = np.reshape(self.predict(X), (np.shape(y)[0], len(levels)))
        return float(np.mean([d2_pinball_score(y, q[:, k], sample_weight=sample_weight, alpha=a)
                              for k, a in enumerate(levels)]))

    def staged_predict(self, X):
        """Yield the prediction after each fitted round (round 1, 2, ...)."""
        loss = self.booster_.loss
        for raw in self._staged_raw(X):
            yield np.asarray(loss.link(loss_lib.as_predicted(raw, loss), **loss.params),
                             dtype=np.float64)


class JBoostClassifier(_ClassifierBase, _BoostingBase):
    """Gradient boosting of oblivious, depth-wise or loss-guided trees for classification
    (:func:`jboost.fit`).

    Any labels (strings, bools, numbers) are mapped to ``0..K-1`` through ``classes_``. The
    default loss is ``"binomial_deviance"`` for two classes and ``"multinomial_deviance"`` for
    more; another built-in name, :class:`jboost.Loss` or function may be given. The other
    parameters are :class:`JBoostRegressor`'s (the early-stopping split is stratified).

    Attributes:
      ``classes_``: the sorted labels, ``np.unique(y)``.
      ``booster_``: as :class:`JBoostRegressor`'s (so are ``n_features_in_``,
        ``feature_names_in_``, ``feature_importances_`` and ``best_round_``).
    """

    def _loss_and_kwargs(self, kwargs):
        return self._classification_kwargs(self.loss, kwargs)

    def decision_function(self, X) -> np.ndarray:
        """Raw scores: ``(n_samples,)`` for two classes (the log-odds of ``classes_[1]`` for the
        binomial deviance), ``(n_samples, K)`` otherwise."""
        X = self._checked(X)
        return np.asarray(jboost.predict(self.booster_, X), dtype=np.float64)

    def staged_predict_proba(self, X):
        """Yield the class probabilities ``(n_samples, n_classes)`` after each fitted round."""
        for raw in self._staged_raw(X):
            yield np.asarray(self.booster_.proba_from_raw(raw), dtype=np.float64)

    def staged_predict(self, X):
        """Yield the predicted labels after each fitted round."""
        for proba in self.staged_predict_proba(X):
            yield self.classes_[np.argmax(proba, axis=1)]


# ---- Random forests: jboost.bagging.fit_forest -----------------------------------------------


class _ForestBase(_JBoostBase):

    _expected_failures = {_WEIGHT_CHECK: _BOOTSTRAP_WEIGHTS}

    def __init__(self, *, n_trees=100, depth=None, max_features="sqrt", min_child_weight=1.0,
                 min_split_gain=0.0, l2=0.0, n_bins=256, bootstrap="multinomial",
                 tree_family=None, random_state=None, interaction_constraints=None,
                 monotone_constraints=None, fit_kwargs=None):
        self.n_trees = n_trees
        self.interaction_constraints = interaction_constraints
        self.monotone_constraints = monotone_constraints
        self.depth = depth
        self.max_features = max_features
        self.min_child_weight = min_child_weight
        self.min_split_gain = min_split_gain
        self.l2 = l2
        self.n_bins = n_bins
        self.bootstrap = bootstrap
        self.tree_family = tree_family
        self.random_state = random_state
        self.fit_kwargs = fit_kwargs

    def _fit_model(self, X, y, sample_weight, fit_params):
        kwargs = _merged(dict(n_trees=self.n_trees, depth=self.depth, tree_family=self.tree_family,
                              max_features=self.max_features,
                              min_child_weight=self.min_child_weight,
                              min_split_gain=self.min_split_gain, l2=self.l2, n_bins=self.n_bins,
                              bootstrap=self.bootstrap, key=_seed(self.random_state),
                              interaction_constraints=self.interaction_constraints,
                              monotone_constraints=self.monotone_constraints),
                         self.fit_kwargs, "JBoost forest estimators")
        if self._classifier:
            self._weighted_classes(y, sample_weight)
            kwargs.update(task="classification", n_classes=len(self.classes_))
        else:
            kwargs.update(task="regression")
        kwargs.update(fit_params)
        return bagging.fit_forest(X, y, sample_weight=sample_weight, **kwargs)


class JBoostForestRegressor(RegressorMixin, _ForestBase):
    """A random forest of oblivious or depth-wise trees (``tree_family``) for regression
    (:func:`jboost.bagging.fit_forest`).

    Parameters are ``fit_forest``'s (``random_state`` is its ``key``; ``max_features=None``:
    bagged trees); ``fit_kwargs``: any other keyword of ``fit_forest``. ``predict`` is the
    average of the trees' leaf means. Attributes: ``booster_`` (the :class:`jboost.bagging.Forest`),
    ``n_features_in_``, ``feature_names_in_``, ``feature_importances_``.
    """

    def __init__(self, *, n_trees=100, depth=None, max_features="third", min_child_weight=1.0,
                 min_split_gain=0.0, l2=0.0, n_bins=256, bootstrap="multinomial",
                 tree_family=None, random_state=None, interaction_constraints=None,
                 monotone_constraints=None, fit_kwargs=None):
        super().__init__(n_trees=n_trees, depth=depth, max_features=max_features,
                         min_child_weight=min_child_weight, min_split_gain=min_split_gain, l2=l2,
                         n_bins=n_bins, bootstrap=bootstrap, tree_family=tree_family,
                         random_state=random_state,
                         interaction_constraints=interaction_constraints,
                         monotone_constraints=monotone_constraints, fit_kwargs=fit_kwargs)

    def predict(self, X) -> np.ndarray:
        X = self._checked(X)
        return np.asarray(jboost.predict(self.booster_, X), dtype=np.float64)


class JBoostForestClassifier(_ClassifierBase, _ForestBase):
    """A random forest of oblivious or depth-wise trees (``tree_family``) for classification
    (:func:`jboost.bagging.fit_forest`).

    Any labels are mapped to ``0..K-1`` (``classes_``); ``predict_proba`` is the average of the
    trees' class frequencies (ESL Algorithm 15.1), ``predict`` its argmax as the original label.
    Parameters and attributes as :class:`JBoostForestRegressor`'s (``max_features`` default
    ``"sqrt"``), plus ``classes_``.
    """


# ---- Bagged boosters: jboost.bagging.fit_bagged_boosters -------------------------------------


class _BaggingBase(_JBoostBase):

    _expected_failures = {_WEIGHT_CHECK: _BOOTSTRAP_WEIGHTS}

    def __init__(self, loss=None, *, n_bags=10, bootstrap="multinomial", n_rounds=100, depth=6,
                 learning_rate=0.1, l2=1.0, min_split_gain=0.0, min_child_weight=1.0,
                 subsample=1.0, colsample=1.0, n_bins=256, random_state=None,
                 early_stopping_rounds=None, cat_features=None, monotone_constraints=None,
                 interaction_constraints=None, fit_kwargs=None):
        self.loss = loss
        self.cat_features = cat_features
        self.monotone_constraints = monotone_constraints
        self.interaction_constraints = interaction_constraints
        self.n_bags = n_bags
        self.bootstrap = bootstrap
        self.n_rounds = n_rounds
        self.depth = depth
        self.learning_rate = learning_rate
        self.l2 = l2
        self.min_split_gain = min_split_gain
        self.min_child_weight = min_child_weight
        self.subsample = subsample
        self.colsample = colsample
        self.n_bins = n_bins
        self.random_state = random_state
        self.early_stopping_rounds = early_stopping_rounds
        self.fit_kwargs = fit_kwargs

    def _fit_model(self, X, y, sample_weight, fit_params):
        kwargs = _merged(dict(n_bags=self.n_bags, bootstrap=self.bootstrap,
                              n_rounds=self.n_rounds, depth=self.depth,
                              learning_rate=self.learning_rate, l2=self.l2,
                              min_split_gain=self.min_split_gain,
                              min_child_weight=self.min_child_weight, subsample=self.subsample,
                              colsample=self.colsample, n_bins=self.n_bins,
                              key=_seed(self.random_state),
                              early_stopping_rounds=self.early_stopping_rounds,
                              cat_features=self.cat_features,
                              monotone_constraints=self.monotone_constraints,
                              interaction_constraints=self.interaction_constraints),
                         self.fit_kwargs, "JBoost bagging estimators")
        loss = "squared_error" if self.loss is None else self.loss
        if self._classifier:
            self._weighted_classes(y, sample_weight)
            kwargs, loss = self._classification_kwargs(self.loss, kwargs)
        kwargs.update(fit_params)
        model = bagging.fit_bagged_boosters(X, y, loss, sample_weight=sample_weight, **kwargs)
        if model.best_round is not None:
            self.best_round_ = np.asarray(model.best_round)
        return model


class JBoostBaggingRegressor(RegressorMixin, _BaggingBase):
    """Bagged gradient-boosted ensembles for regression (:func:`jboost.bagging.fit_bagged_boosters`).

    Parameters are ``fit_bagged_boosters``'s (``random_state`` is its ``key``); with
    ``early_stopping_rounds`` each bag stops on its own out-of-bag rows (or on the fit parameter
    ``eval_set``) and ``best_round_`` holds every bag's best round ``(n_bags,)``. ``predict`` is
    the mean over bags of each bag's prediction through the loss's link. Attributes:
    ``booster_`` (the :class:`jboost.bagging.BaggedBoosters`), ``n_features_in_``,
    ``feature_names_in_``, ``feature_importances_``.
    """

    def predict(self, X) -> np.ndarray:
        X = self._checked(X)
        return np.asarray(bagging.bagged_predict(self.booster_, X), dtype=np.float64)


class JBoostBaggingClassifier(_ClassifierBase, _BaggingBase):
    """Bagged gradient-boosted ensembles for classification (:func:`jboost.bagging.fit_bagged_boosters`).

    Any labels are mapped to ``0..K-1`` (``classes_``); the default loss is
    ``"binomial_deviance"`` for two classes and ``"multinomial_deviance"`` for more.
    ``predict_proba`` is the mean over bags of each bag's probabilities, ``predict`` its argmax.
    Parameters and attributes as :class:`JBoostBaggingRegressor`'s, plus ``classes_``.
    """
