"""What a newcomer trips over (issue 45), each fixed and held here: the advice an error gives is
followed literally and works.

The end-to-end fits share conftest's shapes (``FIT_KW``).
"""

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from _pure_jax import pure_jax
from conftest import F, FIT_KW, N
from jax._src import monitoring
from jboost.data import rows
from jboost.fitting import prepare


def cauchy(y, raw, c=1.0):
    """A custom loss with a parameter (the README's example)."""
    return jnp.log1p(((y - raw) / c) ** 2)


def other_loss(y, raw):
    return (y - raw) ** 2


@pytest.mark.parametrize("as_loss", [False, True], ids=["function", "Loss"])
def test_loads_advice_for_a_custom_loss_works_as_written(tmp_path, as_loss):
    """``jboost.load`` of a custom-loss model says ``jboost.load(path, loss=cauchy)``: doing just
    that loads it (it used to refuse: the file names the loss ``'custom'`` when it was a
    ``jboost.Loss`` without a name), with the parameters the file holds; another function is
    refused, naming both."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, F)).astype(np.float32)
    y = X[:, 0] + 0.1 * rng.normal(size=N).astype(np.float32)
    loss = jboost.Loss(cauchy, params={"c": 2.0}) if as_loss else cauchy
    model = jboost.fit(X, y, loss, **FIT_KW)
    path = tmp_path / "m.jbm"
    jboost.save(model, path)
    with pytest.raises(ValueError) as e:
        jboost.load(path)
    advice = re.search(r"jboost\.load\(path, loss=(\w+)\)", str(e.value))
    assert advice, str(e.value)
    loaded = jboost.load(path, loss={"cauchy": cauchy}[advice.group(1)])
    np.testing.assert_array_equal(jboost.predict(loaded, X), jboost.predict(model, X))
    if as_loss:
        assert float(loaded.loss.params["c"]) == 2.0
    with pytest.raises(ValueError, match=r"loss='other_loss' does not match .*cauchy"):
        jboost.load(path, loss=other_loss)


def test_importance_carries_the_feature_names_of_every_model_type():
    """``jboost.feature_importance`` and ``jboost.inspect.importance`` return a NumPy array
    labelled with the model's feature names (a DataFrame's columns) for boosters and forests
    alike: ``names``, ``as_dict()``, a printout by name; an array computed from it is plain (a
    sorted copy keeps no labels), and a model fitted on an array has none."""
    pd = pytest.importorskip("pandas")
    from jboost import bagging

    rng = np.random.default_rng(1)
    cols = [f"col_{c}" for c in "abcde"[:F]]
    X = pd.DataFrame(rng.normal(size=(N, F)).astype(np.float32), columns=cols)
    y = (X["col_a"] + 0.5 * X["col_b"] > 0).astype(np.float32)
    models = {"booster": jboost.fit(X, y, "binomial_deviance", **FIT_KW),
              "forest": bagging.fit_forest(X, y, task="binary", n_trees=4, depth=3, n_bins=32)}
    for name, model in models.items():
        for imp in (jboost.feature_importance(model), jboost.inspect.importance(model)):
            assert imp.names == tuple(cols), name
            assert list(imp.as_dict()) == cols
            np.testing.assert_array_equal(list(imp.as_dict().values()), np.asarray(imp))
            assert repr(imp).startswith("Importance(col_a=")
            for derived in (np.sort(imp), imp[::-1], imp * 100, imp[:2]):
                assert getattr(derived, "names", None) is None
    plain = jboost.feature_importance(jboost.fit(X.to_numpy(), y.to_numpy(), "binomial_deviance",
                                                 **FIT_KW))
    assert plain.names is None
    with pytest.raises(ValueError, match="without feature names"):
        plain.as_dict()


def test_spam_order_is_documented_and_a_shuffle_is_offered():
    """``load_spam()`` keeps the file's order (sorted by class, as its docstring says: the last
    rows of the training set are one class); ``shuffle=seed`` permutes each split's rows, the
    same rows, reproducibly."""
    from jboost import datasets
    try:
        X, y, Xt, yt = datasets.load_spam()
    except FileNotFoundError:
        pytest.skip("spambase is not in the data directory")
    assert "sorted by class" in datasets.load_spam.__doc__
    assert (y[:1218] == 1).all() and (y[1218:] == 0).all()   # why a tail split is one class
    Xs, ys, Xts, yts = datasets.load_spam(shuffle=0)
    assert 0.2 < ys[-300:].mean() < 0.6                      # a tail split holds both classes
    order = np.lexsort(X.T)
    np.testing.assert_array_equal(np.sort(ys), np.sort(y))
    np.testing.assert_array_equal(Xs[np.lexsort(Xs.T)], X[order])
    np.testing.assert_array_equal(datasets.load_spam(shuffle=0)[0], Xs)
    assert Xts.shape == Xt.shape and np.sort(yts).tolist() == np.sort(yt).tolist()
    with pytest.raises(TypeError, match="shuffle"):
        datasets.load_spam(shuffle=True)


def focal(y, raw, gamma=2.0):
    """A focal loss of 0/1 labels and log-odds ``raw`` (Lin et al. 2017)."""
    p = jax.nn.sigmoid(raw)
    pt = jnp.where(y == 1, p, 1 - p)
    return -((1 - pt) ** gamma) * jnp.log(jnp.clip(pt, 1e-7, 1.0))


def test_a_bare_custom_loss_on_01_labels_warns_and_says_how_to_classify():
    """A custom loss given as a bare function fits a regression unless told its task: on labels
    all 0 or 1 a ``UserWarning`` says so and names ``task='binary'``, which then gives a
    classifier with probabilities; ``task='regression'`` keeps the regression, silently."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(N, F)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float32)
    with pytest.warns(UserWarning, match=r"no task and y holds only 0 and 1.*task='binary'"):
        reg = jboost.fit(X, y, focal, **FIT_KW)
    assert reg.loss.task == "regression"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf = jboost.fit(X, y, focal, task="binary", **FIT_KW)
        jboost.fit(X, y, focal, task="regression", **FIT_KW)
        jboost.fit(X, y + 0.5, other_loss, **FIT_KW)  # not 0/1 labels: nothing to say
    proba = np.asarray(jboost.predict_proba(clf, X))
    assert proba.shape == (N, 2) and np.allclose(proba.sum(1), 1)
    assert (np.argmax(proba, 1) == y).mean() > 0.8


# --- #2: training rows bucketed: nearby row counts share one program, the model bitwise that of
# the exact row count.

def _programs_lowered(fn):
    """The names of the programs JAX lowers while ``fn()`` runs (its compile log)."""
    names = []

    def listener(event, duration, **kw):
        if event.endswith("jaxpr_to_mlir_module_duration"):
            names.append(kw.get("fun_name"))

    monitoring.register_event_duration_secs_listener(listener)
    try:
        fn()
    finally:
        monitoring.unregister_event_duration_listener(listener)
    return names


@pytest.mark.parametrize("kw", [dict(loss="logistic"), dict(loss=lambda y, raw: (y - raw) ** 2,
                                                                 task="regression"),
                                dict(tree_family="lossguide", max_leaves=6, subsample=0.8)],
                         ids=["logistic", "custom", "lossguide"])
def test_a_fit_of_1400_rows_after_1500_compiles_nothing(kw):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 4)).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (X[:, 0] > 0).astype(np.float32)
    settings = dict(n_rounds=4, depth=3, n_bins=16, key=0, **kw)
    jboost.fit(X, y, **settings)
    lowered = _programs_lowered(lambda: jboost.fit(X[:1400], y[:1400], **settings))
    assert lowered == [], lowered
    assert jboost.fit(X[:1400], y[:1400], **settings).n_rounds == 4


def _exact_and_bucketed(monkeypatch, X, y, **kw):
    """The fit of ``X, y`` at its exact row count (padding switched off) and as ``jboost.fit``
    runs it (padded to its bucket)."""
    with monkeypatch.context() as mp:
        mp.setattr(prepare, "padded_rows", lambda data, size: data)
        exact = jboost.fit(X, y, **kw)
    return exact, jboost.fit(X, y, **kw)


def _bitwise(a, b):
    leaves_a, leaves_b = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(leaves_a) == len(leaves_b)
    for u, v in zip(leaves_a, leaves_b):
        u, v = np.asarray(u), np.asarray(v)
        assert u.shape == v.shape and u.dtype == v.dtype and u.tobytes() == v.tobytes(), (u, v)


#: Random cases of the bucketing property: (loss, labels), tree families, samplers, weights.
_LOSSES = ["squared_error", "logistic", "multinomial_deviance", "absolute_error", "huber",
           "custom"]
_EXTRAS = [dict(), dict(subsample=0.7), dict(colsample=0.5, colsample_by="level"),
           dict(row_sampler="poisson", subsample=0.9), dict(tree_family="depthwise"),
           dict(tree_family="lossguide", max_leaves=9), dict(weights=True),
           dict(margin=True), dict(eval=True)]


def _random_case(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(257, 5000))
    while rows.bucket(n) == n:  # a count that is padded
        n += 1
    X = rng.normal(size=(n, 5)).astype(np.float32)
    X[rng.random(X.shape) < rng.uniform(0, 0.2)] = np.nan
    loss = _LOSSES[seed % len(_LOSSES)]
    signal = np.nan_to_num(X[:, 0]) * 2
    if loss == "logistic":
        y = (signal + rng.normal(size=n) > 0).astype(np.float32)
    elif loss == "multinomial_deviance":
        y = np.digitize(signal + rng.normal(size=n), [-1, 1]).astype(np.float32)
    else:
        y = (signal + rng.standard_cauchy(n) * 0.3 + 5 * rng.uniform()).astype(np.float32)
    kw = dict(n_rounds=int(rng.integers(3, 9)), depth=int(rng.integers(1, 6)), key=seed,
              n_bins=int(rng.choice([16, 64, 256])), learning_rate=float(rng.uniform(0.05, 0.5)))
    kw["loss"] = (lambda y, raw: jnp.logaddexp(y - raw, raw - y)) if loss == "custom" else loss
    if loss == "custom":
        kw["task"] = "regression"
    extra = dict(_EXTRAS[seed % len(_EXTRAS)])  # seeds 0-11 already draw every loss and every extra
    if extra.pop("weights", False):
        kw["sample_weight"] = rng.choice([0.0, 0.5, 1.0, 3.0], size=n).astype(np.float32)
    if extra.pop("margin", False) and loss != "multinomial_deviance":
        kw["base_margin"] = rng.normal(size=n).astype(np.float32)
    if extra.pop("eval", False):
        m = 300
        kw.update(eval_set=(X[:m] + 0.1, y[:m]), early_stopping_rounds=2)
    kw.update(extra)
    return X, y, kw


@pytest.mark.parametrize("seed", range(12))
def test_a_bucketed_fit_is_bitwise_the_fit_of_its_exact_row_count(seed, monkeypatch):
    """Padding to the bucket (zero-weight rows) changes no bit of the model: trees, gains,
    baseline, loss curves (the sums over rows are padding-invariant, the kernels sum rows of
    zero payload as nothing, and the static plans read the bucket)."""
    X, y, kw = _random_case(seed)
    exact, bucketed = _exact_and_bucketed(monkeypatch, X, y, **kw)
    _bitwise(exact, bucketed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12, 24))
def test_a_bucketed_fit_is_bitwise_the_fit_of_its_exact_row_count_many(seed, monkeypatch):
    X, y, kw = _random_case(seed)
    exact, bucketed = _exact_and_bucketed(monkeypatch, X, y, **kw)
    _bitwise(exact, bucketed)


def test_a_bucketed_fit_is_bitwise_on_the_pure_jax_path(monkeypatch):
    """The pure-JAX path (the kernels off, as on GPUs and TPUs) pads alike, on the CPU."""
    for seed in (0, 13):
        X, y, kw = _random_case(seed)
        exact, bucketed = pure_jax(_exact_and_bucketed, monkeypatch, X, y, **kw)
        _bitwise(exact, bucketed)


def test_row_buckets_and_padding_invariant_sums():
    assert rows.bucket(1400) == rows.bucket(1500) == 1536
    assert [rows.bucket(n) for n in (1, 256, 257, 1024, 1025)] == [256, 256, 320, 1024, 1280]
    big = rows.MAX_BUCKETED_ROWS + 1
    assert rows.bucket(big) == big
    for n in range(1, big, 97):  # a bucket is its own; the padding bounded
        b = rows.bucket(n)
        assert b >= n and rows.bucket(b) == b
        assert n <= rows.SMALLEST_BUCKET or b - n <= b / (4 if n <= rows.FINE_FROM else 16)
    rng = np.random.default_rng(0)
    for n in rng.integers(1, 3000, 8):
        x = (rng.normal(size=(int(n), 3)) * 10.0 ** rng.uniform(-4, 4)).astype(np.float32)
        padded = np.concatenate([x, -np.zeros((rows.bucket(int(n)) - int(n) + 7, 3), np.float32)])
        assert np.asarray(rows.row_sum(x)).tobytes() == np.asarray(rows.row_sum(padded)).tobytes()
        np.testing.assert_allclose(rows.row_sum(x), x.sum(0, dtype=np.float64), rtol=1e-5,
                                   atol=1e-5 * np.abs(x).sum(0).max())
