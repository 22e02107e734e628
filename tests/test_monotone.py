"""Monotone constraints (``monotone_constraints=``, jboost/trees/monotone.py).

The property: along every constrained feature, every row's prediction never decreases (``+1``) or
never increases (``-1``), exactly (float rounding is monotone and every row sums its trees in the
same order), on random data, random constraints and random settings (losses with and without a
leaf refit, depths, rates, row and column sampling by tree and by level, missing values, vector
leaves and a tree per output, several devices). The constraint must also cost little where the
truth is monotone, and errors name the argument and the fix.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost.trees import monotone, splits
from tests import _processes

LOSSES = ("squared_error", "huber", "quantile", "binomial_deviance", "poisson", "log_cosh")


def log_cosh(y, raw):
    return jnp.logaddexp(y - raw, raw - y)


def draw(seed: int):
    """A random table, constraints and settings."""
    rng = np.random.default_rng(seed)
    n, f = int(rng.integers(150, 1200)), int(rng.integers(2, 6))
    X = rng.normal(size=(n, f)).astype(np.float32)
    if rng.random() < 0.5:  # missing values
        X[rng.random(size=X.shape) < 0.1] = np.nan
    signs = rng.choice([-1, 0, 1], size=f)
    signs[rng.integers(f)] = rng.choice([-1, 1])
    trend = np.nan_to_num(X) @ rng.normal(size=f)
    noise = rng.normal(size=n)
    loss = LOSSES[seed % len(LOSSES)]
    if loss == "binomial_deviance":
        y = (trend + noise > 0).astype(np.float32)
    elif loss == "poisson":
        y = rng.poisson(np.exp(0.3 * np.clip(trend, -3, 3))).astype(np.float32)
    else:
        y = (np.sin(2 * trend) + trend + 0.5 * noise).astype(np.float32)
    settings = dict(n_rounds=int(rng.integers(3, 25)), depth=int(rng.integers(1, 7)),
                    learning_rate=float(rng.choice([0.05, 0.3, 1.0])),
                    l2=float(rng.choice([0.0, 1.0])), subsample=float(rng.choice([0.7, 1.0])),
                    colsample=float(rng.choice([0.6, 1.0])),
                    colsample_by=str(rng.choice(["tree", "level"])), key=seed)
    loss_obj = {"quantile": jboost.losses.quantile(0.7), "log_cosh": jboost.Loss(log_cosh)}.get(loss, loss)
    return X, y, loss_obj, tuple(int(s) for s in signs), settings


def probe_rows(X, feature: int, rng, n_rows: int = 40, n_grid: int = 60):
    """``(n_rows, n_grid, F)``: rows of ``X`` whose ``feature`` runs over a sorted grid reaching
    past the data on both sides and through its values (every border lies between two)."""
    base = X[rng.integers(0, X.shape[0], size=n_rows)]
    column = X[:, feature][~np.isnan(X[:, feature])]
    grid = np.sort(np.concatenate([np.linspace(-6, 6, n_grid // 2),
                                   rng.choice(column, size=n_grid - n_grid // 2)])).astype(np.float32)
    rows = np.repeat(base[:, None, :], len(grid), axis=1)
    rows[:, :, feature] = grid
    return rows


def assert_monotone(model, X, signs, seed: int):
    rng = np.random.default_rng(seed + 1000)
    for f, sign in enumerate(signs):
        if sign == 0:
            continue
        rows = probe_rows(X, f, rng)
        raw = np.asarray(jboost.predict(model, rows.reshape(-1, X.shape[1])))
        raw = raw.reshape(rows.shape[0], rows.shape[1], -1)
        steps = sign * np.diff(raw, axis=1)
        assert np.all(steps >= 0), (f"feature {f} sign {sign}: the prediction moves against the "
                                    f"constraint by {steps.min():g}")


@pytest.mark.parametrize("seed", range(24))
def test_predictions_are_monotone_on_random_fits(seed):
    X, y, loss, signs, settings = draw(seed)
    model = jboost.fit(X, y, loss, monotone_constraints=signs, **settings)
    assert_monotone(model, X, signs, seed)
    assert tuple(np.asarray(model.settings["monotone_constraints"]).tolist()) == signs


@pytest.mark.parametrize("seed", range(10))
def test_node_tables_are_monotone_on_random_fits(seed):
    # depth-wise (even seeds) and loss-guided trees (odd): each node's bounds, refused candidates
    X, y, loss, signs, settings = draw(100 + seed)
    family = dict(tree_family="lossguide", max_leaves=int(np.random.default_rng(seed).integers(2, 24))
                  ) if seed % 2 else dict(tree_family="depthwise")
    model = jboost.fit(X, y, loss, monotone_constraints=signs, **settings, **family)
    assert_monotone(model, X, signs, seed)


def test_vector_leaves_and_a_tree_per_output_are_monotone_per_output():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(800, 3)).astype(np.float32)
    Y = np.stack([np.sin(3 * X[:, 0]) + X[:, 1], -np.cos(2 * X[:, 0]) - X[:, 2]], axis=1)
    Y = (Y + 0.3 * rng.normal(size=Y.shape)).astype(np.float32)
    loss = jboost.Loss(lambda y, raw: jnp.sum((y - raw) ** 2), n_outputs=2)
    for per_output in (False, True):
        for family in ("oblivious", "depthwise"):
            model = jboost.fit(X, Y, loss, n_rounds=20, depth=4, learning_rate=0.5,
                               per_output_trees=per_output, monotone_constraints=[1, 0, -1],
                               tree_family=family)
            assert_monotone(model, X, (1, 0, -1), seed=per_output)


def test_multiclass_raw_scores_are_monotone():
    X, y = jboost.datasets.waveform(600, seed=0)
    model = jboost.fit(X, y, "multinomial_deviance", n_rounds=10, depth=3,
                       monotone_constraints={0: 1, 5: -1})
    signs = [0] * X.shape[1]
    signs[0], signs[5] = 1, -1
    assert_monotone(model, np.asarray(X, np.float32), signs, seed=7)


def test_a_monotone_truth_costs_little_and_a_wrong_sign_costs_much():
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(3000, 3)).astype(np.float32)
    truth = np.tanh(2 * X[:, 0]) + X[:, 0] + np.sin(3 * X[:, 1])
    y = (truth + 0.5 * rng.normal(size=3000)).astype(np.float32)
    Xt = rng.uniform(-2, 2, size=(3000, 3)).astype(np.float32)
    tt = np.tanh(2 * Xt[:, 0]) + Xt[:, 0] + np.sin(3 * Xt[:, 1])

    for family in ("oblivious", "depthwise"):
        def mse(constraints):
            model = jboost.fit(X, y, n_rounds=100, depth=4, monotone_constraints=constraints,
                               tree_family=family)
            return float(np.mean((np.asarray(jboost.predict(model, Xt)) - tt) ** 2))

        free, right, wrong = mse(None), mse([1, 0, 0]), mse([-1, 0, 0])
        assert right <= 1.1 * free, (family, free, right)
        assert wrong > 5 * right, (family, right, wrong)


def test_constraints_by_column_name_for_a_dataframe():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"income": rng.normal(size=500), "age": rng.normal(size=500)})
    y = (np.sin(3 * frame["income"]) + frame["income"] + frame["age"] ** 2).to_numpy(np.float32)
    model = jboost.fit(frame, y, n_rounds=20, depth=3, monotone_constraints={"income": 1})
    assert np.asarray(model.settings["monotone_constraints"]).tolist() == [1, 0]
    assert_monotone(model, frame.to_numpy(np.float32), (1, 0), seed=2)


def test_a_sweep_of_traced_settings_keeps_the_constraints():
    import jax

    X, y, _, signs, _ = draw(1)
    models = jax.vmap(lambda lr: jboost.fit(X, y, n_rounds=10, depth=3, learning_rate=lr,
                                            monotone_constraints=signs))(jnp.array([0.1, 1.0]))
    raw = np.asarray(jboost.predict(models, X))
    for i in range(2):
        one = jboost.fit(X, y, n_rounds=10, depth=3, learning_rate=[0.1, 1.0][i],
                         monotone_constraints=signs)
        np.testing.assert_allclose(raw[i], np.asarray(jboost.predict(one, X)), atol=1e-5)


@pytest.mark.parametrize("kwargs, message", [
    (dict(monotone_constraints=[1, 0]), "one sign"),
    (dict(monotone_constraints=[1, 0, 2]), r"must be \+1"),
    (dict(monotone_constraints=[True, 0, 0]), r"must be \+1"),
    (dict(monotone_constraints={"income": 1}), "does not have"),
    (dict(monotone_constraints={7: 1}), "feature index"),
    (dict(monotone_constraints=[1, 0, 0], split_criterion=splits.SplitCriterion(
        splits.NEWTON.score, splits.NEWTON.value, "mine")), "custom split_criterion"),
])
def test_errors_name_the_argument_and_the_fix(kwargs, message):
    X = np.random.default_rng(0).normal(size=(100, 3)).astype(np.float32)
    with pytest.raises(ValueError, match=message):
        jboost.fit(X, X[:, 0], n_rounds=2, depth=2, **kwargs)


def test_a_continued_fit_keeps_the_same_constraints():
    X, y, _, signs, _ = draw(2)
    first = jboost.fit(X, y, n_rounds=5, depth=3, monotone_constraints=signs)
    more = jboost.fit(X, y, n_rounds=5, depth=3, monotone_constraints=signs, init_model=first)
    assert_monotone(more, X, signs, seed=3)
    with pytest.raises(ValueError, match="differ from init_model"):
        jboost.fit(X, y, n_rounds=5, depth=3, init_model=jboost.fit(X, y, n_rounds=2, depth=2),
                   monotone_constraints=signs)
    with pytest.raises(ValueError, match="pass the same monotone_constraints"):
        jboost.fit(X, y, n_rounds=5, depth=3, init_model=first)


def test_all_zero_constraints_are_the_unconstrained_fit():
    X, y, _, _, _ = draw(4)
    a = jboost.fit(X, y, n_rounds=8, depth=3)
    b = jboost.fit(X, y, n_rounds=8, depth=3, monotone_constraints=[0] * X.shape[1])
    assert np.array_equal(np.asarray(jboost.predict(a, X)), np.asarray(jboost.predict(b, X)))


def test_model_files_keep_the_constraints(tmp_path):
    X, y, _, signs, _ = draw(5)
    model = jboost.fit(X, y, n_rounds=5, depth=3, monotone_constraints=signs)
    jboost.save(model, tmp_path / "m.jbm")
    again = jboost.load(tmp_path / "m.jbm")
    assert np.asarray(again.settings["monotone_constraints"]).tolist() == list(signs)
    assert np.array_equal(np.asarray(jboost.predict(again, X)), np.asarray(jboost.predict(model, X)))


SHARDED = """
import numpy as np, jboost
from test_monotone import draw, assert_monotone
X, y, loss, signs, settings = draw(0)
settings.update(subsample=1.0)
for family in ("oblivious", "depthwise"):
    one = jboost.fit(X, y, loss, monotone_constraints=signs, tree_family=family, **settings)
    two = jboost.fit(X, y, loss, monotone_constraints=signs, devices="all", tree_family=family,
                     **settings)
    assert_monotone(two, X, signs, 0)
    np.testing.assert_allclose(np.asarray(jboost.predict(two, X)),
                               np.asarray(jboost.predict(one, X)), atol=1e-4)
print("OK")
"""


@pytest.mark.slow
def test_rows_sharded_over_two_devices():
    out = _processes.on_two_devices(SHARDED, quiet=30, what="the monotone fits on two devices")
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr[-3000:]


@pytest.mark.parametrize("family", ["oblivious", "depthwise", "lossguide"])
def test_numeric_columns_of_a_table_with_categorical_ones(family):
    # the categorical columns' encoded features (one-hot indicators, statistics) are free;
    # constraining a categorical column is refused (its categories have no order)
    pd = pytest.importorskip("pandas")
    X, y, _, _, _ = draw(40)
    rng = np.random.default_rng(40)
    frame = pd.DataFrame({"k": pd.Categorical(rng.choice(["u", "v"], size=X.shape[0])),
                          "a": X[:, 0], "b": X[:, 1]})  # encoded: k==u, k==v, a, b, m:ctr
    frame["m"] = pd.Categorical(rng.choice([f"m{i}" for i in range(12)], size=len(frame)))
    y = y + np.where(frame["k"] == "u", 1.0, -1.0).astype(np.float32) * np.nan_to_num(X[:, 0])
    kw = dict(n_rounds=15, depth=4, tree_family=family, one_hot_max_size=2, key=4,
              learning_rate=0.3)
    model = jboost.fit(frame, y, monotone_constraints={"a": 1, "b": -1}, **kw)
    assert np.asarray(model.settings.arrays["monotone_constraints"]).tolist() == [0, 0, 1, -1, 0]
    for f, sign in ((0, 1), (1, -1)):
        rows = probe_rows(X[:, :2], f, np.random.default_rng(f))
        base = frame.iloc[np.arange(rows.shape[0]).repeat(rows.shape[1])].reset_index(drop=True)
        base["a"], base["b"] = rows[:, :, 0].ravel(), rows[:, :, 1].ravel()
        raw = np.asarray(jboost.predict(model, base)).reshape(rows.shape[:2])
        assert np.all(sign * np.diff(raw, axis=1) >= 0), f
    with pytest.raises(ValueError, match="'k', a categorical column"):
        jboost.fit(frame, y, monotone_constraints={"k": 1}, **kw)


def test_the_scikit_learn_regressor_takes_the_constraints():
    pytest.importorskip("sklearn")
    from jboost.sklearn import JBoostRegressor

    X, y, _, signs, _ = draw(6)
    est = JBoostRegressor(n_rounds=10, depth=3, monotone_constraints=list(signs)).fit(X, y)
    assert est.get_params()["monotone_constraints"] == list(signs)
    assert_monotone(est.booster_, X, signs, seed=6)


@pytest.mark.parametrize("grower", ["dense", "compact", "lossguide"])
def test_node_growers_refuse_out_of_order_candidates(grower):
    # The gradient falls as x0 grows, so the Newton values rise with it: under monotone=(-1, 0)
    # no split on x0 is in order, and the trees split on x1 alone.
    from jboost.trees import depthwise, lossguide

    rng = np.random.default_rng(0)
    X = rng.integers(0, 16, size=(2, 800)).astype(np.uint8)
    grad = (-(X[0] - 7.5) - 0.2 * (X[1] - 7.5) + 0.1 * rng.normal(size=800)).astype(np.float32)[:, None]
    X, grad, hess = jnp.asarray(X), jnp.asarray(grad), jnp.ones_like(jnp.asarray(grad))
    kw = dict(depth=3, n_bins=17, l2=1.0, min_split_gain=0.0, min_child_weight=1.0)
    grow = {"dense": lambda **k: depthwise.fit_tree(X, grad, hess, **k),
            "compact": lambda **k: depthwise.fit_tree(X, grad, hess, max_nodes=8, **k),
            "lossguide": lambda **k: lossguide.fit_tree(X, grad, hess, max_leaves=8, **k)}[grower]
    free, _ = grow(**kw)
    tree, _ = grow(monotone=(-1, 0), **kw)
    splits_on = lambda t: {int(f) for f, g in zip(np.asarray(t.features), np.asarray(t.gains)) if g > 0}  # noqa: E731
    assert 0 in splits_on(free)
    assert splits_on(tree) == {1}


@pytest.mark.parametrize("family", ["depthwise", "oblivious"])
def test_regression_forests_are_monotone(family):
    # m random features per node (depth-wise) or per level (oblivious), each tree's leaves
    # clipped to its bounds: every tree monotone, so is their mean
    X, y, _, signs, _ = draw(30)
    forest = jboost.bagging.fit_forest(X, y, task="regression", n_trees=6, depth=5,
                                       max_features=2, tree_family=family,
                                       monotone_constraints=signs, key=2)
    assert_monotone(forest, X, signs, seed=30)


@pytest.mark.parametrize("family", ["depthwise", "oblivious"])
def test_two_class_forests_are_monotone_in_the_probability_of_class_1(family):
    # Two classes: the trees fit the 0/1 target, one leaf value (class 1's frequency) clipped;
    # K > 2 class frequencies sum to 1 and cannot all follow a sign: refused
    X, y, _, signs, _ = draw(31)
    labels = (y > np.median(y)).astype(np.int32)
    forest = jboost.bagging.fit_forest(X, labels, n_trees=6, depth=5, max_features=2,
                                       tree_family=family, monotone_constraints=signs, key=3)
    free = jboost.bagging.fit_forest(X, labels, n_trees=6, depth=5, max_features=2,
                                     tree_family=family, key=3)

    p1 = lambda model: (lambda rows: np.asarray(jboost.predict_proba(model, rows))[:, 1])  # noqa: E731
    rng = np.random.default_rng(31)
    broken = 0
    for f, sign in enumerate(signs):
        if sign == 0:
            continue
        rows = probe_rows(X, f, rng)
        flat = rows.reshape(-1, X.shape[1])
        steps = sign * np.diff(p1(forest)(flat).reshape(rows.shape[:2]), axis=1)
        assert np.all(steps >= 0), f"feature {f}: class 1's probability moves against {sign}"
        broken += int(np.sum(sign * np.diff(p1(free)(flat).reshape(rows.shape[:2]), axis=1) < 0))
    assert broken > 0  # the free forest breaks the signs: the check has something to find
    with pytest.raises(ValueError, match="3 classes"):
        jboost.bagging.fit_forest(X, np.digitize(y, np.quantile(y, [0.33, 0.66])).astype(np.int32),
                                  n_trees=2, depth=3, tree_family=family, monotone_constraints=signs)
