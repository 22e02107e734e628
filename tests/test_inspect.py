"""jboost.inspect: exact SHAP values (against brute-force Shapley values of the same path-dependent
value function, written independently below), local accuracy for every model type, interaction
values, importance by hand, permutation importance, and shap.TreeExplainer where installed."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost import bagging
from jboost import combine
from jboost import inspect as ji
from jboost import losses as losses_lib
from jboost.trees.depthwise import DepthwiseTrees
from jboost.models import ensemble
from jboost.trees import family
from jboost.trees import oblivious

F = 4
ROWS = 12  # the rows explained by most tests (one shape: shared compiled programs)
KW = dict(n_rounds=4, depth=3, n_bins=16, learning_rate=0.5)


def _data(n, seed, nan=True):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, F)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * X[:, 3] + 0.1 * rng.standard_normal(n)).astype(np.float32)
    if nan:
        X[::5, 1] = np.nan
        X[2::7, 2] = np.nan
    return X, y


@pytest.fixture(scope="module")
def reg():
    X, y = _data(200, 0)
    return X, y, jboost.fit(X, y, "squared_error", **KW)


# --------------------------------------------------------------------------------------------
# Brute force: the path-dependent value function walked node by node, all 2^F subsets.
# --------------------------------------------------------------------------------------------


def _leaves(features, borders, missing_right, X):
    cols = X[:, features]                                           # (n, D)
    right = np.where(np.isnan(cols), missing_right[None], cols > borders[None])
    return (right.astype(np.int64) << np.arange(len(features))[None]).sum(1)


def _tree_value(t, S, x, counts):
    """Path-dependent v(S) of one tree (numpy arrays) at row x with leaf counts ``counts``."""
    features, borders, missing, values = t
    depth = len(features)
    total = counts.sum()

    def cover(level, node):  # background count of the node: leaves whose low `level` bits are node
        mask = (np.arange(len(counts)) & ((1 << level) - 1)) == node
        return counts[mask].sum()

    def level_share(l, b):
        return counts[((np.arange(len(counts)) >> l) & 1) == b].sum() / total

    def walk(l, node):
        if l == depth:
            return values[node]
        f = features[l]
        if f in S:
            b = missing[l] if np.isnan(x[f]) else x[f] > borders[l]
            return walk(l + 1, node + (int(b) << l))
        c = cover(l, node)
        out = 0.0
        for b in (0, 1):
            share = cover(l + 1, node + (b << l)) / c if c > 0 else level_share(l, b)
            if share:
                out = out + share * walk(l + 1, node + (b << l))
        return out

    return walk(0, 0)


def _numpy_trees(trees):
    flat = family.flatten_trees(trees)
    return [tuple(np.asarray(a[i]) for a in (flat.features, flat.borders, flat.missing_right, flat.leaf_values))
            for i in range(flat.features.shape[0])]


def brute_force(trees, constant, X, data, interactions=False):
    """Shapley values (or interaction values) over all F features of v(S) = constant + sum_t v_t(S)."""
    ts = _numpy_trees(trees)
    counts = [np.bincount(_leaves(t[0], t[1], t[2], data), minlength=len(t[3])).astype(np.float64) for t in ts]
    n_f = X.shape[1]
    out = []
    for x in X:
        v = {}
        for r in range(n_f + 1):
            for S in itertools.combinations(range(n_f), r):
                v[frozenset(S)] = np.asarray(constant, np.float64) + sum(
                    _tree_value(t, set(S), x, c) for t, c in zip(ts, counts))
        full = frozenset(range(n_f))
        phi = []
        for j in range(n_f):
            rest = full - {j}
            phi.append(sum(math.factorial(len(S)) * math.factorial(n_f - len(S) - 1) / math.factorial(n_f)
                           * (v[S | {j}] - v[S]) for S in (frozenset(c) for r in range(n_f) for c in
                                                           itertools.combinations(sorted(rest), r))))
        phi = np.stack(phi)
        if not interactions:
            out.append(phi)
            continue
        inter = np.zeros((n_f, n_f) + phi.shape[1:])
        for i in range(n_f):
            for j in range(n_f):
                if i == j:
                    continue
                rest = full - {i, j}
                inter[i, j] = sum(math.factorial(len(S)) * math.factorial(n_f - len(S) - 2)
                                  / (2 * math.factorial(n_f - 1))
                                  * (v[S | {i, j}] - v[S | {i}] - v[S | {j}] + v[S])
                                  for S in (frozenset(c) for r in range(n_f - 1)
                                            for c in itertools.combinations(sorted(rest), r)))
        for i in range(n_f):
            inter[i, i] = phi[i] - sum(inter[i, j] for j in range(n_f) if j != i)
        out.append(inter)
    return np.stack(out), v[frozenset()]


# --------------------------------------------------------------------------------------------
# Exactness.
# --------------------------------------------------------------------------------------------


def test_shap_values_equal_brute_force_shapley_values_with_missing_rows(reg):
    X, y, model = reg
    rows = X[:ROWS]                                 # rows 0, 5, 10: NaN in feature 1; 2, 9: in 2
    background = X[40:40 + ROWS]                    # 12 rows: many nodes of zero cover
    sv = ji.shap_values(model, rows, data=background)
    expect, ev = brute_force(model.trees, model.baseline, rows, background)
    np.testing.assert_allclose(np.asarray(sv.values), expect[..., 0], atol=2e-5)
    np.testing.assert_allclose(float(sv.expected_value), ev[0], atol=2e-5)
    # The default background is X itself: the expected value is the mean prediction.
    own = ji.shap_values(model, rows)
    np.testing.assert_allclose(float(own.expected_value), float(jnp.mean(jboost.predict(model, rows))), rtol=1e-5)


def test_weighted_background_equals_repeated_rows(reg):
    X, y, model = reg
    background = X[40:40 + ROWS]
    w = np.arange(ROWS) % 3                            # 0, 1, 2: a weight of 0 drops the row
    weighted = ji.shap_values(model, X[:ROWS], data=background, data_weight=w)
    repeated = ji.shap_values(model, X[:ROWS], data=np.repeat(background, w, axis=0))
    np.testing.assert_allclose(np.asarray(weighted.values), np.asarray(repeated.values), atol=1e-6)
    np.testing.assert_allclose(float(weighted.expected_value), float(repeated.expected_value), atol=1e-6)
    with pytest.raises(ValueError, match="data_weight"):
        ji.shap_values(model, X[:ROWS], data=background, data_weight=-w)


def test_multiclass_values_per_class_equal_brute_force(reg):
    X = reg[0]
    rng = np.random.default_rng(2)
    model = ensemble.as_booster(_trees(rng, (2, 2), k=3), jnp.zeros((F, 15), jnp.float32),
                               jnp.array([0.1, -0.2, 0.3]), losses_lib.multinomial_deviance(3))
    rows, background = X[:ROWS], X[40:40 + ROWS]
    sv = ji.shap_values(model, rows, data=background)
    assert sv.values.shape == (ROWS, F, 3) and sv.expected_value.shape == (3,)
    expect, ev = brute_force(model.trees, model.baseline, rows, background)
    np.testing.assert_allclose(np.asarray(sv.values), expect, atol=2e-5)
    np.testing.assert_allclose(np.asarray(sv.expected_value), ev, atol=2e-5)


def test_interaction_values_equal_brute_force_and_sum_to_shap_values(reg):
    X, y, model = reg
    rows, background = X[:ROWS], X[40:40 + ROWS]
    iv = ji.shap_interaction_values(model, rows, data=background)
    sv = ji.shap_values(model, rows, data=background)
    expect, _ = brute_force(model.trees, model.baseline, rows, background, interactions=True)
    np.testing.assert_allclose(np.asarray(iv.values), expect[..., 0], atol=2e-5)
    np.testing.assert_allclose(np.asarray(iv.values).sum(-1), np.asarray(sv.values), atol=1e-5)
    np.testing.assert_allclose(np.asarray(iv.values), np.swapaxes(np.asarray(iv.values), 1, 2), atol=1e-6)
    pred = np.asarray(jboost.predict(model, rows))
    np.testing.assert_allclose(np.asarray(iv.values).sum((1, 2)) + float(iv.expected_value), pred, atol=1e-5)


def test_row_by_row_pass_for_deep_trees_equals_the_per_leaf_tables(reg):
    X, y, model = reg
    trees = family.flatten_trees(model.trees)
    args = (trees, jnp.asarray(X[:ROWS]), jnp.asarray(X[40:40 + ROWS]), jnp.ones((ROWS,), jnp.float32))
    tables = ji.explain_trees(*args)                    # depth 3: per-leaf tables (the default)
    rows = ji.explain_trees(*args, per_leaf=False)      # what trees deeper than 10 levels use
    np.testing.assert_allclose(np.asarray(tables[0]), np.asarray(rows[0]), atol=1e-6)
    np.testing.assert_allclose(np.asarray(tables[1]), np.asarray(rows[1]), atol=1e-6)


def test_a_feature_used_at_two_levels_is_one_player():
    # Tree: levels split on features (0, 0, 1): feature 0 twice; brute force over 3 features.
    trees = oblivious.ObliviousTrees(
        features=jnp.array([[0, 0, 1]], jnp.int32), thresholds=jnp.zeros((1, 3), jnp.int32),
        borders=jnp.array([[-0.5, 0.5, 0.0]], jnp.float32), missing_right=jnp.array([[True, False, True]]),
        leaf_values=jnp.arange(8, dtype=jnp.float32).reshape(1, 8, 1) ** 1.5,
        gains=jnp.ones((1, 3), jnp.float32))
    rng = np.random.default_rng(3)
    X = rng.standard_normal((10, 3)).astype(np.float32)
    X[1, 0] = np.nan
    values, expected = ji.explain_trees(trees, jnp.asarray(X), jnp.asarray(X), jnp.ones((10,)))
    expect, ev = brute_force(trees, np.zeros(1), X, X)
    np.testing.assert_allclose(np.asarray(values), expect, atol=1e-5)
    assert np.all(np.asarray(values)[:, 2] == 0)


# --------------------------------------------------------------------------------------------
# Every model type: local accuracy.
# --------------------------------------------------------------------------------------------


def _local_accuracy(model, X, atol=2e-5):
    sv = ji.shap_values(model, X)
    pred = np.asarray(jboost.predict(model, X))
    values = np.asarray(sv.values)
    feat_axis = len(model.batch_shape) + 1
    total = values.sum(axis=feat_axis)
    ev = np.asarray(sv.expected_value)
    ev = ev.reshape(ev.shape[:len(model.batch_shape)] + (1,) + ev.shape[len(model.batch_shape):])
    np.testing.assert_allclose(total + ev, pred, atol=atol, rtol=1e-5)
    return sv


def _trees(rng, lead, k=1, depth=3):
    """Random oblivious trees with leading axes ``lead`` (features may repeat within a tree)."""
    shape = tuple(lead)
    return oblivious.ObliviousTrees(
        features=jnp.asarray(rng.integers(0, F, shape + (depth,)), jnp.int32),
        thresholds=jnp.zeros(shape + (depth,), jnp.int32),
        borders=jnp.asarray(rng.normal(size=shape + (depth,)), jnp.float32),
        missing_right=jnp.asarray(rng.uniform(size=shape + (depth,)) < 0.5),
        leaf_values=jnp.asarray(rng.normal(size=shape + (2**depth, k)), jnp.float32),
        gains=jnp.ones(shape + (depth,), jnp.float32))


@pytest.mark.slow
def test_local_accuracy_of_every_model_type(reg):
    """Every model of the protocol, built from random trees (no fitting): the values of its trees
    plus the expected value are its raw prediction."""
    X = reg[0]
    rng = np.random.default_rng(5)
    borders = jnp.zeros((F, 15), jnp.float32)
    sq = losses_lib.squared_error()
    booster = lambda lead, k=1: ensemble.as_booster(_trees(rng, lead, k=k), borders,
                                                   jnp.asarray(rng.normal(size=k), jnp.float32), sq)
    models = {  # every one a sum of 6 trees of 1 or 3 outputs: two compiled programs
        "booster_best_round": booster((8, 1))._replace(best_round=jnp.int32(5)),
        "multiclass_vector_leaves": ensemble.as_booster(_trees(rng, (3, 2), k=3), borders,
                                                       jnp.array([0.1, -0.2, 0.3]), losses_lib.multinomial_deviance(3)),
        "forest": bagging.Forest(_trees(rng, (6,), k=3), borders, jnp.ones((6, 5), jnp.float32)),
        "bagged_best_rounds": bagging.BaggedBoosters(_trees(rng, (2, 4, 1)), borders, jnp.array([[0.5], [1.0]]),
                                                     sq, jnp.ones((2, 5)), jnp.zeros((2, 4)),
                                                     best_round=jnp.array([1, 2], jnp.int32)),
        "ecoc": combine.ECOCBoosters(_trees(rng, (3, 2, 1)), borders, jnp.array([[0.1], [0.2], [0.3]]),
                                     jnp.asarray(combine.exhaustive_code(3), jnp.float32)),
        "stacked": combine.StackedBoosters(_trees(rng, (2, 3, 1)), borders, jnp.array([[0.5], [1.0]]),
                                           combine.LinearModel(jnp.array([[0.3], [0.9]]), jnp.array([0.2])),
                                           jnp.zeros((5, 2, 1)), sq),
        # A batch whose best rounds differ (traced under the batch's vmap): a third program.
        "batch_best_rounds": jax.tree_util.tree_map(
            lambda a: jnp.stack([a, 2 * a if a.dtype == jnp.float32 else a]), booster((6, 1)))._replace(
            best_round=jnp.array([0, 2], jnp.int32)),
    }
    for name, model in models.items():
        sv = _local_accuracy(model, X[:ROWS])
        assert np.all(np.isfinite(np.asarray(sv.values))), name
    assert ji.shap_values(models["ecoc"], X[:ROWS]).values.shape == (ROWS, F, models["ecoc"].n_bits)
    sv = ji.shap_values(models["stacked"], X[:ROWS], n_rounds=2)   # the first rounds only
    np.testing.assert_allclose(np.asarray(sv.values).sum(-1) + float(sv.expected_value),
                               np.asarray(jboost.predict(models["stacked"], X[:ROWS], n_rounds=2)),
                               atol=1e-5)


@pytest.fixture(scope="module")
def vmapped(reg):
    X, y, _ = reg
    rates = jnp.array([0.1, 0.5], jnp.float32)
    return jax.vmap(lambda lr: jboost.fit(X, y, "squared_error", **{**KW, "learning_rate": lr}))(rates)


@pytest.mark.slow
def test_a_vmapped_model_gives_every_models_values(reg, vmapped):
    X, y, _ = reg
    sv = _local_accuracy(vmapped, X[:ROWS])
    assert sv.values.shape == (2, ROWS, F) and sv.expected_value.shape == (2,)
    for i in range(2):
        one = jax.tree_util.tree_map(lambda a: a[i], vmapped)
        np.testing.assert_allclose(np.asarray(sv.values[i]), np.asarray(ji.shap_values(one, X[:ROWS]).values),
                                   atol=1e-6)


# --------------------------------------------------------------------------------------------
# Importance.
# --------------------------------------------------------------------------------------------


def _hand_model(per_output=False):
    """Two rounds; gains by hand on 3 features (feature 2 never split)."""
    k = 2 if per_output else 1
    feats = jnp.array([[[0, 1]], [[0, 0]]], jnp.int32)               # (R=2, T=1, D=2)
    gains = jnp.array([[[9.0, 4.0]], [[16.0, 0.0]]], jnp.float32)    # 0: a null split
    if per_output:                                                   # T = 2 trees per round
        feats = jnp.concatenate([feats, jnp.array([[[1, 1]], [[2, 1]]], jnp.int32)], axis=1)
        gains = jnp.concatenate([gains, jnp.array([[[1.0, 3.0]], [[8.0, 0.0]]], jnp.float32)], axis=1)
    shape = feats.shape
    trees = oblivious.ObliviousTrees(feats, jnp.zeros(shape, jnp.int32), jnp.zeros(shape, jnp.float32),
                                    jnp.zeros(shape, bool), jnp.zeros(shape[:-1] + (4, k), jnp.float32), gains)
    loss = losses_lib.multinomial_deviance(2) if per_output else losses_lib.squared_error()
    return ensemble.as_booster(trees, jnp.zeros((3, 15), jnp.float32), jnp.zeros((k,), jnp.float32), loss)


def test_importance_definitions_by_hand():
    model = _hand_model()
    np.testing.assert_allclose(ji.importance(model, "gain"), [25.0, 4.0, 0.0])
    np.testing.assert_allclose(ji.importance(model, "split_count"), [2.0, 1.0, 0.0])
    # ESL 10.42-10.43: sqrt of the summed squared improvements, the largest scaled to 100.
    np.testing.assert_allclose(ji.importance(model, "relative"), [100.0, 40.0, 0.0], rtol=1e-6)
    np.testing.assert_allclose(jboost.feature_importance(model), [25 / 29, 4 / 29, 0.0], rtol=1e-6)
    # Early stopping after round 0: the later round's splits are not in the predictions.
    np.testing.assert_allclose(ji.importance(model._replace(best_round=jnp.int32(0)), "gain"), [9.0, 4.0, 0.0])
    with pytest.raises(ValueError, match="per_output_trees=True"):
        ji.importance(model, per_class=True)
    with pytest.raises(ValueError, match="kind='shap'"):
        ji.importance(model, "shap")


def test_relative_importance_per_class_and_their_average():
    model = _hand_model(per_output=True)
    per = np.asarray(ji.importance(model, "relative", per_class=True))
    # class 0: gains 0 -> 25, 1 -> 4; class 1: 0 -> 0, 1 -> 1 + 3 = 4, 2 -> 8 (per 2 trees each).
    i0 = np.sqrt(np.array([25.0, 4.0, 0.0]) / 2)
    i1 = np.sqrt(np.array([0.0, 4.0, 8.0]) / 2)
    np.testing.assert_allclose(per, [100 * i0 / i0.max(), 100 * i1 / i1.max()], rtol=1e-6)
    mean = (i0 + i1) / 2
    np.testing.assert_allclose(ji.importance(model, "relative"), 100 * mean / mean.max(), rtol=1e-6)
    np.testing.assert_allclose(ji.importance(model, "gain", per_class=True), [[25, 4, 0], [0, 4, 8]])


def test_importance_of_a_vmapped_model_is_per_model(reg, vmapped):
    X, y, _ = reg
    for kind in ji.IMPORTANCE_KINDS:
        imp = np.asarray(ji.importance(vmapped, kind))
        assert imp.shape == (2, F), kind
        for i in range(2):
            one = jax.tree_util.tree_map(lambda a: a[i], vmapped)
            np.testing.assert_allclose(imp[i], np.asarray(ji.importance(one, kind)), rtol=1e-6)
    fi = np.asarray(jboost.feature_importance(vmapped))
    assert fi.shape == (2, F)
    np.testing.assert_allclose(fi.sum(-1), 1.0, rtol=1e-5)


def test_permutation_importance_on_held_out_rows(reg, vmapped):
    X, y, model = reg
    Xt, yt = _data(150, 9)
    imp = np.asarray(ji.permutation_importance(model, Xt, yt, n_repeats=3, key=1))
    assert imp.shape == (F, 3)
    gain = np.asarray(ji.importance(model, "gain"))
    assert np.all(np.abs(imp[gain == 0]) < 1e-6)          # a feature no split uses: no change
    assert imp.mean(-1)[0] > 0.2                            # the strongest feature matters
    again = np.asarray(ji.permutation_importance(model, Xt, yt, n_repeats=3, key=1))
    np.testing.assert_array_equal(imp, again)
    mse = np.asarray(ji.permutation_importance(model, Xt, yt, metric="mse", n_repeats=3, key=1))
    np.testing.assert_allclose(mse, 2 * imp, rtol=1e-3, atol=1e-6)   # squared_error is half the mse
    batch = np.asarray(ji.permutation_importance(vmapped, Xt, yt, n_repeats=2))
    assert batch.shape == (2, F, 2)


# --------------------------------------------------------------------------------------------
# The shap package on the same trees written in its own format.
# --------------------------------------------------------------------------------------------


def _as_shap_trees(trees, counts):
    """Each oblivious tree as a full binary tree in shap's dict format: node covers from the leaf
    counts, a missing value goes where the level sends it (``children_default``)."""
    out = []
    for t, c in zip(_numpy_trees(trees), counts):
        features, borders, missing, values = t
        depth = len(features)
        left, right, default, feat, thr, val, cover = [], [], [], [], [], [], []

        def add(level, node):
            i = len(feat)
            for a in (left, right, default, feat, thr):
                a.append(-1)
            val.append(np.zeros(values.shape[1]))
            mask = (np.arange(len(c)) & ((1 << level) - 1)) == node
            cover.append(c[mask].sum())
            if level == depth:
                val[i] = values[node]
                feat[i], thr[i] = 0, 0.0
                return i
            # shap: x <= threshold goes left; jboost: x > border goes right (the same rule).
            feat[i], thr[i] = features[level], float(borders[level])
            li = add(level + 1, node)
            ri = add(level + 1, node + (1 << level))
            left[i], right[i] = li, ri
            default[i] = ri if missing[level] else li
            return i

        add(0, 0)
        out.append({"children_left": np.array(left), "children_right": np.array(right),
                    "children_default": np.array(default), "features": np.array(feat),
                    "thresholds": np.array(thr, np.float64), "values": np.array(val),
                    "node_sample_weight": np.array(cover, np.float64)})
    return out


def test_agrees_with_shap_tree_explainer_on_the_same_trees():
    """shap.TreeExplainer (path-dependent) on jboost's trees written in shap's dict format (each
    oblivious tree as a full binary tree, node covers = the background counts). shap refuses
    trees with a leaf of zero cover, so these trees split distinct features at borders that
    leave every leaf a share of the 2000 background rows."""
    shap = pytest.importorskip("shap")
    rng = np.random.default_rng(11)
    X = rng.standard_normal((2000, F)).astype(np.float32)
    X[rng.uniform(size=X.shape) < 0.05] = np.nan
    n_trees, depth = 5, 3
    trees = oblivious.ObliviousTrees(
        features=jnp.asarray(np.stack([rng.permutation(F)[:depth] for _ in range(n_trees)]), jnp.int32)[:, None],
        thresholds=jnp.zeros((n_trees, 1, depth), jnp.int32),
        borders=jnp.asarray(rng.uniform(-0.6, 0.6, (n_trees, 1, depth)), jnp.float32),
        missing_right=jnp.asarray(rng.uniform(size=(n_trees, 1, depth)) < 0.5),
        leaf_values=jnp.asarray(rng.normal(size=(n_trees, 1, 2**depth, 1)), jnp.float32),
        gains=jnp.ones((n_trees, 1, depth), jnp.float32))
    model = ensemble.as_booster(trees, jnp.zeros((F, 15), jnp.float32), jnp.array([0.3], jnp.float32),
                               losses_lib.squared_error())
    counts = [np.bincount(_leaves(t[0], t[1], t[2], X), minlength=len(t[3])).astype(np.float64)
              for t in _numpy_trees(trees)]
    assert min(c.min() for c in counts) > 0
    explainer = shap.TreeExplainer({"trees": _as_shap_trees(trees, counts), "base_offset": 0.3},
                                   feature_perturbation="tree_path_dependent")
    rows = X[:ROWS]
    ours = ji.shap_values(model, rows, data=X)
    np.testing.assert_allclose(np.asarray(ours.values), explainer.shap_values(rows.astype(np.float64)), atol=2e-5)
    np.testing.assert_allclose(float(ours.expected_value), float(np.ravel(explainer.expected_value)[0]), atol=2e-5)
    ours_iv = ji.shap_interaction_values(model, rows, data=X)
    np.testing.assert_allclose(np.asarray(ours_iv.values),
                               explainer.shap_interaction_values(rows.astype(np.float64)), atol=2e-5)


# --------------------------------------------------------------------------------------------
# Partial dependence (issue 18 part 2).
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("targets", [(1,), (0, 2)])
def test_partial_dependence_by_traversal_equals_friedmans_walk(reg, targets):
    # Friedman's weighted traversal walked node by node (the brute force above with S = the
    # target features), covers counted from the data (with its NaN rows).
    X, _, model = reg
    pdp = ji.partial_dependence(model, targets, X, grid_resolution=4)
    ts = _numpy_trees(model.trees)
    counts = [np.bincount(_leaves(t[0], t[1], t[2], X), minlength=len(t[3])).astype(np.float64) for t in ts]
    mesh = np.stack([m.reshape(-1) for m in np.meshgrid(*[np.asarray(g) for g in pdp.grid], indexing="ij")], 1)
    want = []
    for point in mesh:
        x = np.zeros(F, np.float32)
        x[list(targets)] = point
        want.append(float(np.asarray(model.baseline)[0]) + sum(
            float(_tree_value(t, set(targets), x, c)[0]) for t, c in zip(ts, counts)))
    np.testing.assert_allclose(np.asarray(pdp.values).reshape(-1), want, rtol=1e-5, atol=1e-5)
    assert np.asarray(pdp.values).shape == tuple(len(g) for g in pdp.grid)


def test_partial_dependence_by_averaging_and_ice_curves(reg):
    # ESL eq. 10.47 by brute force: the mean over the data rows of predict with the column set.
    X, _, model = reg
    pdp = ji.partial_dependence(model, 0, X, grid=[np.array([-1.0, 0.0, 0.7])], method="average", ice=True)
    for i, v in enumerate([-1.0, 0.0, 0.7]):
        rows = X.copy()
        rows[:, 0] = v
        pred = np.asarray(jboost.predict(model, rows))
        np.testing.assert_allclose(np.asarray(pdp.individual)[:, i], pred, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(float(pdp.values[i]), pred.mean(), rtol=1e-5, atol=1e-5)
    # Stumps are additive: the traversal and the average agree.
    stumps = jboost.fit(X, reg[1], "squared_error", **{**KW, "depth": 1})
    a = ji.partial_dependence(stumps, 3, X, grid_resolution=5)
    b = ji.partial_dependence(stumps, 3, X, grid_resolution=5, method="average")
    np.testing.assert_allclose(np.asarray(a.values), np.asarray(b.values), rtol=1e-5, atol=1e-5)


def test_partial_dependence_of_a_vmapped_model_and_bad_arguments(reg, vmapped):
    X, _, model = reg
    pdp = ji.partial_dependence(vmapped, 2, X, grid_resolution=3)
    assert np.asarray(pdp.values).shape == (2, 3)
    one = jax.tree_util.tree_map(lambda a: a[1], vmapped)
    np.testing.assert_allclose(np.asarray(pdp.values[1]),
                               np.asarray(ji.partial_dependence(one, 2, X, grid_resolution=3).values), atol=1e-6)
    with pytest.raises(ValueError, match="features must be one feature or a pair"):
        ji.partial_dependence(model, (0, 1, 2), X)
    with pytest.raises(ValueError, match="ice=True needs method='average'"):
        ji.partial_dependence(model, 0, X, ice=True)
    with pytest.raises(ValueError, match="'age' is not a feature name of the model"):
        ji.partial_dependence(model, "age", X)


# --------------------------------------------------------------------------------------------
# Depth-wise trees (jboost.trees.depthwise): each node its own rule, explained leaf path by leaf path.
# --------------------------------------------------------------------------------------------


def _depthwise_value(t, S, x, counts):
    """Path-dependent v(S) of one depth-wise tree (NumPy fields of its node table) walked node by
    node from the root: children[i] = [left, right], c >= 0 node c, c < 0 leaf ~c; a node of gain
    0 sends everything left; a node's cover is the sum of the leaf counts below it; a split node
    no background row reaches splits by halves."""
    features, borders, missing, values, gains, children = t

    def cover(c):
        return counts[~c] if c < 0 else cover(children[c, 0]) + cover(children[c, 1])

    def walk(c):
        if c < 0:
            return values[~c]
        if gains[c] <= 0:
            return walk(children[c, 0])
        f = features[c]
        if f in S:
            b = missing[c] if np.isnan(x[f]) else x[f] > borders[c]
            return walk(children[c, int(b)])
        n = cover(c)
        return sum((cover(children[c, b]) / n if n > 0 else 0.5) * walk(children[c, b]) for b in (0, 1))

    return walk(0)


def _depthwise_leaves(t, X):
    features, borders, missing, values, gains, children = t
    out = np.zeros(len(X), np.int64)
    for i, x in enumerate(X):
        c = 0
        while c >= 0:
            right = (missing[c] if np.isnan(x[features[c]]) else x[features[c]] > borders[c]) and gains[c] > 0
            c = children[c, int(right)]
        out[i] = ~c
    return out


def _depthwise_numpy(trees):
    flat = family.flatten_trees(trees)
    return [tuple(np.asarray(a[i]) for a in (flat.features, flat.borders, flat.missing_right,
                                           flat.leaf_values, flat.gains, flat.children))
            for i in range(flat.features.shape[0])]


def depthwise_brute_force(model, X, data, interactions=False):
    ts = _depthwise_numpy(model.trees)
    counts = [np.bincount(_depthwise_leaves(t, data), minlength=len(t[3])).astype(np.float64) for t in ts]
    n_f = X.shape[1]
    full = frozenset(range(n_f))
    subsets = [frozenset(c) for r in range(n_f + 1) for c in itertools.combinations(range(n_f), r)]
    out = []
    for x in X:
        v = {S: np.asarray(model.baseline, np.float64) + sum(_depthwise_value(t, S, x, c) for t, c in zip(ts, counts))
             for S in subsets}
        phi = np.stack([sum(math.factorial(len(S)) * math.factorial(n_f - len(S) - 1) / math.factorial(n_f)
                            * (v[S | {j}] - v[S]) for S in subsets if j not in S) for j in range(n_f)])
        if not interactions:
            out.append(phi)
            continue
        inter = np.zeros((n_f, n_f) + phi.shape[1:])
        for i, j in itertools.permutations(range(n_f), 2):
            inter[i, j] = sum(math.factorial(len(S)) * math.factorial(n_f - len(S) - 2) / (2 * math.factorial(n_f - 1))
                              * (v[S | {i, j}] - v[S | {i}] - v[S | {j}] + v[S])
                              for S in subsets if i not in S and j not in S)
        for i in range(n_f):
            inter[i, i] = phi[i] - inter[i].sum(0)
        out.append(inter)
    return np.stack(out), v[frozenset()]


@pytest.fixture(scope="module")
def free():
    """A depth-wise model on the interaction data (missing values in x1 and x2)."""
    X, y = _data(200, 0)
    return X, y, jboost.fit(X, y, "squared_error", tree_family=DepthwiseTrees, **KW)


@pytest.mark.slow
def test_depthwise_shap_and_interaction_values_equal_brute_force(free):
    X, y, m = free
    assert np.any(np.asarray(m.trees.features)[..., 1:] != np.asarray(m.trees.features)[..., :1])  # free rules
    rows = X[:ROWS:2]
    want, expected = depthwise_brute_force(m, rows, X, interactions=True)
    got = ji.shap_interaction_values(m, rows, data=X)
    np.testing.assert_allclose(got.values, want[..., 0], atol=2e-5)
    np.testing.assert_allclose(got.expected_value, expected[0], atol=2e-5)
    shap = ji.shap_values(m, rows, data=X)
    np.testing.assert_allclose(shap.values, want[..., 0].sum(axis=2), atol=2e-5)
    # Local accuracy on rows with missing values, the background the rows themselves.
    s = ji.shap_values(m, X[:ROWS])
    np.testing.assert_allclose(np.asarray(s.values).sum(1) + np.asarray(s.expected_value),
                               np.asarray(jboost.predict(m, X[:ROWS])), atol=2e-5)


def test_depthwise_partial_dependence_importance_and_protocol(free):
    X, y, m = free
    pd = ji.partial_dependence(m, [1, 2], X, grid=[np.array([-1.0, 0.5], np.float32),
                                                    np.array([-0.5, 1.0], np.float32)])
    ts = _depthwise_numpy(m.trees)
    counts = [np.bincount(_depthwise_leaves(t, X), minlength=len(t[3])).astype(np.float64) for t in ts]
    for a, ga in enumerate([-1.0, 0.5]):
        for b, gb in enumerate([-0.5, 1.0]):
            x = np.array([0.0, ga, gb, 0.0])
            want = float(m.baseline[0]) + sum(_depthwise_value(t, {1, 2}, x, c)[0] for t, c in zip(ts, counts))
            np.testing.assert_allclose(pd.values[a, b], want, rtol=1e-5, atol=1e-5)
    imp = np.asarray(ji.importance(m, "gain"))
    gains, feats = np.asarray(m.trees.gains).reshape(-1), np.asarray(m.trees.features).reshape(-1)
    np.testing.assert_allclose(imp, np.bincount(feats, weights=np.maximum(gains, 0), minlength=F), rtol=1e-5)


def _table(features, borders, missing, children, values, gains, level_counts):
    """One depth-wise tree's node table from lists (thresholds unused by raw-value prediction)."""
    n = len(features)
    return DepthwiseTrees(
        features=jnp.asarray(features, jnp.int32), thresholds=jnp.full((n,), 14, jnp.int32),
        borders=jnp.asarray(borders, jnp.float32), missing_right=jnp.asarray(missing, bool),
        children=jnp.asarray(children, jnp.int32),
        leaf_values=jnp.asarray(values, jnp.float32).reshape(n + 1, 1),
        gains=jnp.asarray(gains, jnp.float32), level_counts=jnp.asarray(level_counts, jnp.int32))


def _ragged_trees():
    """Three depth-3 trees of 4 node slots whose leaves sit at different depths: (a) leaves at
    depths 1, 2, 3, 3, feature 0 twice on one path, one unused slot; (b) the root's right
    child a leaf, its left a node that no background row reaches (its background rows with a
    missing x1 go left too: it splits by halves); (c) a root that does not split."""
    null = (0, 0.0, False, (-1, -1), 0.0)  # feature, border, missing right, children, gain
    a = [(0, 0.0, False, (~0, 1), 2.0), (2, 0.3, True, (~1, 2), 1.0), (0, 0.8, True, (~2, ~3), 0.5), null]
    b = [(1, 5.0, False, (~0, 1), 3.0), (2, 0.0, False, (~1, ~2), 1.5), null, null]
    c = [null] * 4
    rows = []
    for nodes, values, counts in ((a, [1.5, -2.0, 0.7, 3.1, 0.0], [1, 1, 1]),
                                  (b, [0.4, -1.1, 2.2, 0.0, 0.0], [1, 1, 0]),
                                  (c, [0.9, 0.0, 0.0, 0.0, 0.0], [0, 0, 0])):
        f, bo, mr, ch, g = zip(*nodes)
        rows.append(_table(f, bo, mr, ch, values, g, counts))
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs)[:, None], *rows)  # (3 rounds, 1)


@pytest.mark.slow
def test_depthwise_paths_of_different_lengths_equal_brute_force():
    """Hand-made node tables with leaves at depths 1 to 3 (paths of variable length, their steps
    past the end null players): SHAP and interaction values equal brute-force Shapley values of
    the path-dependent value function over the 3 features, sum with the expected value to the
    prediction, and partial dependence is the brute-force walk."""
    trees = _ragged_trees()
    model = ensemble.as_booster(trees, jnp.zeros((3, 15), jnp.float32), jnp.array([0.25], jnp.float32),
                               losses_lib.squared_error())
    rng = np.random.default_rng(5)
    data = rng.standard_normal((40, 3)).astype(np.float32)
    data[::6, 1] = np.nan
    data[1::7, 0] = np.nan
    data[2::5, 2] = np.nan
    special = [[0.5, 6.0, np.nan], [1.0, np.nan, 0.5], [-0.1, 7.0, -1.0]]  # x1 > 5: tree (b)'s node 1
    rows = np.concatenate([data[:7], special]).astype(np.float32)
    ts = _depthwise_numpy(trees)
    # The trees are what the docstring says: leaves at different depths, the walk's leaves.
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda t: t.leaf_index_raw(jnp.asarray(rows.T)))(
        family.flatten_trees(trees))), np.stack([_depthwise_leaves(t, rows) for t in ts]))
    assert np.bincount(_depthwise_leaves(ts[1], data), minlength=5)[1:3].sum() == 0  # node 1 unreached
    assert {int(v) for v in _depthwise_leaves(ts[0], rows)} == {0, 1, 2, 3}
    want, expected = depthwise_brute_force(model, rows, data, interactions=True)
    got = ji.shap_interaction_values(model, rows, data=data)
    np.testing.assert_allclose(np.asarray(got.values), want[..., 0], atol=2e-5)
    np.testing.assert_allclose(float(got.expected_value), expected[0], atol=2e-5)
    sv = ji.shap_values(model, rows, data=data)
    np.testing.assert_allclose(np.asarray(sv.values), want[..., 0].sum(axis=2), atol=2e-5)
    np.testing.assert_allclose(np.asarray(sv.values).sum(1) + float(sv.expected_value),
                               np.asarray(jboost.predict(model, rows)), atol=2e-5)
    assert np.any(np.abs(np.asarray(sv.values)) > 0.1, axis=0).all()  # every feature plays
    for targets in ((0,), (0, 2)):
        grid = [np.array([-0.5, 0.2, 1.0], np.float32)] * len(targets)
        pd = ji.partial_dependence(model, targets, data, grid=grid)
        for idx in itertools.product(range(3), repeat=len(targets)):
            x = np.zeros(3)
            x[list(targets)] = [grid[0][i] for i in idx]
            want_pd = 0.25 + sum(_depthwise_value(t, set(targets), x,
                                                  np.bincount(_depthwise_leaves(t, data), minlength=5))[0]
                                 for t in ts)
            np.testing.assert_allclose(np.asarray(pd.values)[idx], want_pd, rtol=1e-5, atol=1e-5)


def test_depthwise_forest_of_compact_tables_equals_brute_force():
    """A forest grown on few rows (node tables of fewer slots than 2**D - 1, leaves at many
    depths): its SHAP values equal the brute force, and sum to its prediction."""
    X, y = _data(24, 3)
    forest = bagging.fit_forest(X, y, task="regression", n_trees=3, depth=6, max_features=2, n_bins=16,
                                key=2, tree_family="depthwise")
    n_slots = forest.trees.features.shape[-1]
    assert n_slots < 2**6 - 1 and forest.trees.leaf_values.shape[-2] == n_slots + 1
    ts = _depthwise_numpy(forest.trees)
    depths = set()
    for t in ts:  # the depth of every used leaf
        def down(c, d):
            if c < 0:
                depths.add(d)
            elif t[4][c] > 0:
                down(t[5][c, 0], d + 1), down(t[5][c, 1], d + 1)
            else:
                down(t[5][c, 0], d)
        down(0, 0)
    assert len(depths) >= 3
    booster_like = forest.trees._replace(leaf_values=forest.trees.leaf_values / 3)
    m = type("M", (), {"trees": booster_like, "baseline": np.zeros(1)})
    rows = X[:6]
    want, expected = depthwise_brute_force(m, rows, X)
    sv = ji.shap_values(forest, rows, data=X)
    np.testing.assert_allclose(np.asarray(sv.values), want[..., 0], atol=2e-5)
    np.testing.assert_allclose(float(sv.expected_value), expected[0], atol=2e-5)
    np.testing.assert_allclose(np.asarray(sv.values).sum(1) + float(sv.expected_value),
                               np.asarray(jboost.predict(forest, rows)), atol=2e-5)
