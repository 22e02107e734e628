"""Interaction constraints (``interaction_constraints=``, jboost/trees/interactions.py).

The property, XGBoost's definition (its ``src/tree/constraints.cc``): every node of every tree
splits on a feature its path allows: any feature at the root; after the path's features ``U``,
``U`` and every feature of every group that holds all of ``U``. Checked node by node against a
plain-Python transcription of that rule, on random data built to tempt forbidden interactions,
random groups (overlapping, features in no group), every tree family and grower (oblivious,
depth-wise dense and compact levels, loss-guided), with column masks and per-node feature draws,
through the growers and through ``jboost.fit``; the unconstrained trees of the same data break the
rule (so the check has something to find). Errors name the argument and the fix.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost.trees import depthwise, family, interactions, lossguide, oblivious
from tests import _processes

F, N, DEPTH, BINS = 7, 600, 4, 17


def reference_allowed(path: set, groups) -> set:
    """XGBoost's rule, written out: the features a node of path features ``path`` may split on."""
    if not path:
        return set(range(F))
    out = set(path)
    for group in groups:
        if path <= set(group):
            out |= set(group)
    return out


def table_violations(tree, groups) -> int:
    """Nodes of a depth-wise / loss-guided node table that split on a feature their path forbids."""
    feats, children, gains = (np.asarray(tree.features), np.asarray(tree.children),
                              np.asarray(tree.gains))
    bad, stack = 0, [(0, frozenset())] if gains.size and gains[0] > 0 else []
    while stack:
        node, path = stack.pop()
        f = int(feats[node])
        bad += f not in reference_allowed(set(path), groups)
        for child in children[node]:
            if child >= 0:
                stack.append((int(child), path | {f}))
    return bad


def oblivious_violations(tree, groups) -> int:
    """Levels of an oblivious tree (one path) that split on a feature the levels above forbid."""
    bad, path = 0, set()
    for f, gain in zip(np.asarray(tree.features), np.asarray(tree.gains)):
        if gain > 0:
            bad += int(f) not in reference_allowed(path, groups)
            path.add(int(f))
    return bad


def each_tree(trees):
    """The single trees of a model's stacked trees."""
    flat = family.flatten_trees(trees)
    return [type(flat)(*(np.asarray(a)[t] for a in flat)) for t in range(flat.features.shape[0])]


def draw(seed: int):
    """Binned data whose gradients reward forbidden interactions, and random groups."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, BINS - 1, size=(F, N)).astype(np.uint8)
    if seed % 2:
        X[:, rng.random(N) < 0.1] = BINS - 1  # the missing bin
    u = X.astype(np.float32) / BINS - 0.5
    pairs = rng.choice(F, size=(3, 2), replace=False if F >= 6 else True)
    g = sum(u[a] * u[b] for a, b in pairs) + 0.3 * u[rng.integers(F)] + 0.05 * rng.normal(size=N)
    n_groups = int(rng.integers(1, 4))
    groups = [list(rng.choice(F, size=int(rng.integers(1, 4)), replace=False)) for _ in range(n_groups)]
    groups = interactions.resolve(groups, F)
    hess = rng.uniform(0.5, 1.5, size=(N, 1)).astype(np.float32)
    return jnp.asarray(X), jnp.asarray(g[:, None].astype(np.float32)), jnp.asarray(hess), groups


GROWERS = {
    "oblivious": lambda X, g, h, **kw: oblivious.fit_tree(X, g, h, **kw),
    "depthwise_dense": lambda X, g, h, **kw: depthwise.fit_tree(X, g, h, **kw),
    "depthwise_compact": lambda X, g, h, **kw: depthwise.fit_tree(X, g, h, max_nodes=12, **kw),
    "lossguide": lambda X, g, h, **kw: lossguide.fit_tree(X, g, h, max_leaves=12, **kw),
}


@pytest.mark.parametrize("grower", sorted(GROWERS))
def test_every_node_splits_on_an_allowed_feature(grower):
    count = oblivious_violations if grower == "oblivious" else table_violations
    free_breaks = 0
    for seed in range(5):
        X, g, h, groups = draw(seed)
        kw = dict(depth=DEPTH, n_bins=BINS, l2=1.0, min_split_gain=0.0, min_child_weight=1.0)
        if seed % 3 == 1:  # a column mask per level as well
            kw["feature_masks"] = jnp.asarray(np.random.default_rng(seed).random((DEPTH, F)) < 0.8)
        tree, _ = GROWERS[grower](X, g, h, interactions=groups, **kw)
        assert count(tree, groups) == 0, (seed, groups)
        assert np.asarray(tree.gains).max() > 0  # the tree splits
        free, _ = GROWERS[grower](X, g, h, **kw)
        free_breaks += count(free, groups)
    assert free_breaks > 0  # without the constraint the same data break it


def test_per_node_feature_draws_keep_the_constraint():
    for seed in range(3):
        X, g, h, groups = draw(seed)
        for max_nodes in (None, 12):  # dense: per-node subsets; compact: the slots' own draws
            tree, _ = depthwise.fit_tree(X, g, h, depth=DEPTH, n_bins=BINS, l2=1.0, min_split_gain=0.0,
                                         min_child_weight=1.0, feature_key=jax.random.key(seed),
                                         max_features=4, max_nodes=max_nodes, interactions=groups)
            assert table_violations(tree, groups) == 0, (seed, max_nodes, groups)


def test_a_feature_in_no_group_splits_alone():
    # Feature 0 carries the signal, and it is in no group: a tree splits on it alone.
    X, _, h, _ = draw(0)
    g = jnp.asarray((np.asarray(X[0], np.float32) - 8.0)[:, None] + 0.1 * np.asarray(X[1])[:, None])
    for grower in ("depthwise_compact", "oblivious", "lossguide"):
        tree, _ = GROWERS[grower](X, g, h, depth=DEPTH, n_bins=BINS, l2=1.0, min_split_gain=0.0,
                                  min_child_weight=1.0, interactions=((1, 2), (3, 4)))
        used = {int(f) for f, gain in zip(np.asarray(tree.features), np.asarray(tree.gains)) if gain > 0}
        assert used == {0}, (grower, used)


def test_allowed_matches_the_rule():
    rng = np.random.default_rng(1)
    for _ in range(50):
        groups = interactions.resolve([list(rng.choice(F, size=int(rng.integers(1, 5)), replace=False))
                                       for _ in range(int(rng.integers(1, 4)))], F)
        paths = rng.random((20, F)) < rng.uniform(0.0, 0.5)
        got = np.asarray(interactions.allowed(jnp.asarray(paths), groups))
        for path, row in zip(paths, got):
            want = reference_allowed(set(np.flatnonzero(path).tolist()), groups)
            assert set(np.flatnonzero(row).tolist()) == want


def _fit_data(seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(800, 5)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] + X[:, 2] * X[:, 3] + X[:, 0] * X[:, 3] + np.sin(X[:, 4])
         + 0.1 * rng.normal(size=800)).astype(np.float32)
    return X, y


@pytest.mark.parametrize("family,extra", [("oblivious", {}), ("depthwise", {}),
                                          ("lossguide", {"max_leaves": 8})])
def test_fit_trees_keep_the_constraint(family, extra):
    X, y = _fit_data()
    groups = [[0, 1], [2, 3], [4]]
    model = jboost.fit(X, y, n_rounds=12, depth=3, tree_family=family, colsample=0.8,
                       interaction_constraints=groups, key=3, **extra)
    free = jboost.fit(X, y, n_rounds=12, depth=3, tree_family=family, colsample=0.8, key=3, **extra)
    resolved = interactions.resolve(groups, 5)
    count = oblivious_violations if family == "oblivious" else table_violations
    assert sum(count(t, resolved) for t in each_tree(model.trees)) == 0
    assert sum(count(t, resolved) for t in each_tree(free.trees)) > 0
    # the constrained model fits the allowed interactions; it cannot fit x0 * x3
    assert float(np.mean((np.asarray(jboost.predict(model, X)) - y) ** 2)) < float(np.var(y))


def test_names_settings_continuation_and_model_files(tmp_path):
    pd = pytest.importorskip("pandas")
    X, y = _fit_data()
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d", "e"])
    model = jboost.fit(frame, y, n_rounds=4, depth=2, tree_family="depthwise",
                       interaction_constraints=[["a", "b"], ["d", "c"]])
    assert interactions.from_table(model.settings.arrays["interaction_constraints"]) == ((0, 1), (2, 3))
    more = jboost.fit(frame, y, n_rounds=2, depth=2, tree_family="depthwise", init_model=model,
                      interaction_constraints=[[1, 0], [2, 3]])  # the same groups, other spelling
    assert len(each_tree(more.trees)) == 6
    with pytest.raises(ValueError, match="differ from init_model"):
        jboost.fit(frame, y, n_rounds=2, depth=2, tree_family="depthwise", init_model=model)
    path = tmp_path / "m.jbm"
    jboost.save(model, path)
    loaded = jboost.load(path)
    np.testing.assert_array_equal(loaded.settings.arrays["interaction_constraints"],
                                  model.settings.arrays["interaction_constraints"])
    np.testing.assert_array_equal(jboost.predict(loaded, frame), jboost.predict(model, frame))


def test_scikit_learn_estimator_takes_them():
    pytest.importorskip("sklearn")
    from jboost.sklearn import JBoostRegressor

    X, y = _fit_data()
    est = JBoostRegressor(n_rounds=6, depth=3, tree_family="depthwise",
                          interaction_constraints=[[0, 1], [2, 3], [4]]).fit(X, y)
    assert est.get_params()["interaction_constraints"] == [[0, 1], [2, 3], [4]]
    resolved = interactions.resolve([[0, 1], [2, 3], [4]], 5)
    assert all(table_violations(t, resolved) == 0 for t in each_tree(est.booster_.trees))


@pytest.mark.parametrize("bad,match", [
    ([[0, 9]], r"feature index in \[0, 5\)"),
    ("ab", "must be a list of feature groups"),
    ([[]], "a group is empty"),
    ([], "names no group"),
    ([0, 1], r"write a group of one feature as \[f\]"),
    ([["x"]], "which X does not have"),
    ([[True, 1]], "neither a column name"),
])
def test_errors_name_the_argument_and_the_fix(bad, match):
    X, y = _fit_data()
    with pytest.raises(ValueError, match=match):
        jboost.fit(X, y, n_rounds=2, interaction_constraints=bad)


def _categorical_frame(seed: int = 0):
    """Numeric ``a, b, c``, a two-category column ``k`` (one-hot: two features) and a
    twelve-category column ``m`` (ordered target statistics: one feature); the target rewards
    ``a*k``, ``b*m`` and ``a*b``."""
    pd = pytest.importorskip("pandas")
    X, _ = _fit_data()
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(X[:, :3], columns=["a", "b", "c"])
    frame["k"] = pd.Categorical(np.where(X[:, 3] > 0, "u", "v"))
    m = rng.integers(0, 12, size=len(frame))
    frame["m"] = pd.Categorical([f"m{i}" for i in m])
    effect = np.linspace(-1, 1, 12)[m]
    y = (X[:, 0] * np.where(X[:, 3] > 0, 1, -1) + X[:, 1] * effect + X[:, 0] * X[:, 1]
         + X[:, 2] + 0.1 * rng.normal(size=len(frame))).astype(np.float32)
    return frame, y


@pytest.mark.parametrize("family,extra", [("depthwise", {}), ("lossguide", {"max_leaves": 8}),
                                          ("oblivious", {})])
@pytest.mark.parametrize("groups", [[["a", "k"], ["b", "c", "m"]], [["a", "b"], ["c", "m"]]])
def test_categorical_columns_are_constrained_through_their_encoded_features(family, extra, groups):
    # a column's encoded features (one-hot indicators, statistics) belong to its groups; a
    # column in no group ("k" in the second case) splits alone, on any of its features
    frame, y = _categorical_frame()
    kw = dict(n_rounds=10, depth=3, tree_family=family, key=2, one_hot_max_size=2, **extra)
    model = jboost.fit(frame, y, interaction_constraints=groups, **kw)
    free = jboost.fit(frame, y, **kw)
    names = model.categorical.spec.encoded_names
    assert names == ("a", "b", "c", "k==u", "k==v", "m:ctr")
    column = lambda name: name.split("==")[0].split(":")[0]  # noqa: E731
    expected = [[f for f, name in enumerate(names) if column(name) in group] for group in groups]
    if not any("k" in group for group in groups):
        expected.append([3, 4])
    expected = interactions.resolve(expected, len(names))
    assert interactions.from_table(model.settings.arrays["interaction_constraints"]) == expected
    count = oblivious_violations if family == "oblivious" else table_violations
    assert sum(count(t, expected) for t in each_tree(model.trees)) == 0
    assert sum(count(t, expected) for t in each_tree(free.trees)) > 0
    np.testing.assert_array_equal(jboost.predict(jboost.fit(frame, y, interaction_constraints=groups,
                                                            init_model=model, **kw), frame)
                                  .shape, (len(frame),))


SHARDED = """
import numpy as np, jboost
from test_interactions import _fit_data, each_tree, table_violations, oblivious_violations
from jboost.trees import interactions
X, y = _fit_data(1)
groups = [[0, 1], [2, 3], [4]]
resolved = interactions.resolve(groups, 5)
for family, extra in (("depthwise", {}), ("lossguide", {"max_leaves": 8}), ("oblivious", {})):
    kw = dict(n_rounds=6, depth=3, tree_family=family, interaction_constraints=groups, **extra)
    one = jboost.fit(X, y, **kw)
    two = jboost.fit(X, y, devices="all", **kw)
    count = oblivious_violations if family == "oblivious" else table_violations
    assert sum(count(t, resolved) for t in each_tree(two.trees)) == 0, family
    np.testing.assert_allclose(np.asarray(jboost.predict(two, X)), np.asarray(jboost.predict(one, X)),
                               atol=1e-4)
print("OK")
"""


@pytest.mark.slow
def test_rows_sharded_over_two_devices():
    out = _processes.on_two_devices(SHARDED, quiet=30, what="the constrained fits on two devices")
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("family,extra", [("oblivious", {"monotone_constraints": [1, 0, 0, 0, -1]}),
                                          ("depthwise", {})])
def test_sweep_rows_keep_the_constraints_and_equal_separate_fits(family, extra):
    from jboost import sweep as sweep_lib

    X, y = _fit_data(2)
    groups = [[0, 1], [2, 3], [4]]
    res = sweep_lib.sweep(X, y, grid={"learning_rate": [0.1, 0.5]}, folds=2, seeds=1, n_rounds=5,
                          depth=3, tree_family=family, interaction_constraints=groups,
                          keep_trees=True, key=4, devices=None, **extra)
    assert res.fixed["interaction_constraints"] == groups
    resolved = interactions.resolve(groups, 5)
    count = oblivious_violations if family == "oblivious" else table_violations
    for i in range(res.n_rows):
        w_train, w_valid = res.fold_weights(i)
        single = jboost.fit(X, y, **res.fit_kwargs(res.config[i]), sample_weight=w_train,
                            eval_set=(X, y, w_valid), key=res.row_key(i))
        assert sum(count(t, resolved) for t in each_tree(single.trees)) == 0
        np.testing.assert_allclose(res.valid_curves[i, :5], np.asarray(single.valid_loss), rtol=2e-6)
        kept = each_tree(res.models([i]).trees)
        assert sum(count(t, resolved) for t in kept) == 0
        for a, b in zip(kept, each_tree(single.trees)):  # the vmapped model is the separate fit
            np.testing.assert_array_equal(np.asarray(a.features), np.asarray(b.features))
            np.testing.assert_array_equal(np.asarray(a.thresholds), np.asarray(b.thresholds))


def test_bagged_boosters_take_both_constraints():
    from test_monotone import assert_monotone

    X, y = _fit_data(3)
    groups = [[0, 1], [2, 3], [4]]
    bags = jboost.bagging.fit_bagged_boosters(X, y, n_bags=3, n_rounds=6, depth=3, tree_family="depthwise",
                                      interaction_constraints=groups,
                                      monotone_constraints=[0, 0, 0, 0, 1], key=5)
    resolved = interactions.resolve(groups, 5)
    assert sum(table_violations(t, resolved) for t in each_tree(bags.trees)) == 0
    assert_monotone(bags, X, (0, 0, 0, 0, 1), seed=5)
    with pytest.raises(ValueError, match="not supported"):
        jboost.bagging.fit_bagged_boosters(X, y, n_bags=2, n_rounds=2, depth=3, init_model=bags,
                                   interaction_constraints=groups)


@pytest.mark.parametrize("family", ["depthwise", "oblivious"])
def test_random_forests_take_interaction_constraints(family):
    X, y = _fit_data(4)
    groups = [[0, 1], [2, 3], [4]]
    forest = jboost.bagging.fit_forest(X, y, task="regression", n_trees=8, depth=4, max_features=3,
                               tree_family=family, interaction_constraints=groups, key=6)
    free = jboost.bagging.fit_forest(X, y, task="regression", n_trees=8, depth=4, max_features=3,
                             tree_family=family, key=6)
    resolved = interactions.resolve(groups, 5)
    count = oblivious_violations if family == "oblivious" else table_violations
    assert sum(count(t, resolved) for t in each_tree(forest.trees)) == 0
    assert sum(count(t, resolved) for t in each_tree(free.trees)) > 0


def test_scikit_learn_forest_and_bagging_estimators_take_them():
    pytest.importorskip("sklearn")
    from jboost.sklearn import JBoostBaggingRegressor, JBoostForestRegressor

    X, y = _fit_data(5)
    groups = [[0, 1], [2, 3], [4]]
    resolved = interactions.resolve(groups, 5)
    forest = JBoostForestRegressor(n_trees=6, depth=4, tree_family="depthwise",
                                   interaction_constraints=groups, random_state=1).fit(X, y)
    assert all(table_violations(t, resolved) == 0 for t in each_tree(forest.booster_.trees))
    bags = JBoostBaggingRegressor(n_bags=2, n_rounds=4, depth=3, interaction_constraints=groups,
                                  monotone_constraints=[0, 0, 0, 0, 1], random_state=1).fit(X, y)
    assert all(oblivious_violations(t, resolved) == 0 for t in each_tree(bags.booster_.trees))
    assert bags.get_params()["monotone_constraints"] == [0, 0, 0, 0, 1]
