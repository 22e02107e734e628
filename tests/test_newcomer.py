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
from conftest import F, FIT_KW, N


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
