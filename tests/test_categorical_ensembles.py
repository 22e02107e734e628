"""Categorical features in sweeps (cross-validation) and bagged boosters (issue 17, last part):
every fold's and every bag's model is the separate weighted jboost.fit (its statistics from its
own training rows), a held-out or out-of-bag row's label never reaches its model's statistics, a
grid over the prior's weight is one compiled program, the models predict DataFrames with
reordered columns and unseen categories; the entry points that take numeric columns only refuse
categorical columns, naming the fix.

Small data (300 rows: a numeric column, a 3-category one-hot column, a 12-category column with
missing values given ordered target statistics), depth 2, 16 bins, 8 rounds; one sweep and one
bagged fit are shared by the tests (module fixtures) and their perturbed reruns reuse the
compiled programs.
"""

from __future__ import annotations

import chex
import jax
import numpy as np
import pytest

import jboost
import test_categorical  # noqa: E402 - its data generator (tests/ is on sys.path)
from jboost import bagging
import jboost.sweep as sweep_lib
from jboost.data import categorical as categorical_lib
from jboost.sweep import program

# Plumbing tests on tiny programs: compiled without XLA's optimisations (conftest.quick_compiles).
pytestmark = pytest.mark.usefixtures("quick_compiles")

pd = pytest.importorskip("pandas")

N, DEPTH, BINS, ROUNDS = 300, 2, 16, 8
KW = dict(n_rounds=ROUNDS, depth=DEPTH, n_bins=BINS, learning_rate=0.5, one_hot_max_size=4)
CITIES = test_categorical.CITIES
WEIGHTS = [0.5, 4.0]  # the swept cat_prior_weight


def _frame(n=N, seed=0):
    """test_categorical's frame (a numeric, a one-hot and a target-statistics column), ``n`` rows."""
    return test_categorical._frame(n, seed)


# Rows no training row has: an unseen city, a missing color, columns in another order.
NEW = pd.DataFrame({"city": ["c03", "atlantis", None, "c11"], "x": [0.2, -1.0, 0.5, 1.5],
                    "color": ["red", "blue", None, "mauve"]})


@pytest.fixture(scope="module")
def data():
    return _frame()


def _sweep(df, y, **kw):
    # Unstratified folds: each training fold has its own positive rate (the default prior).
    args = dict(grid={"cat_prior_weight": WEIGHTS}, folds=3, seeds=1, key=3, keep_trees=True,
                chunk_size=3, stratified=False, **KW)
    args.update(kw)
    return sweep_lib.sweep(df, y, "binomial_deviance", **args)


@pytest.fixture(scope="module")
def res(data):
    """The sweep, its program's body allowed one trace (chex raises on a second)."""
    chex.clear_trace_counter()
    plain = program.fit_chunk
    program.fit_chunk = chex.assert_max_traces(plain, n=1)
    try:
        return _sweep(*data)
    finally:
        program.fit_chunk = plain


def _row(res, i):
    """Row ``i``'s trees, statistics and borders from the sweep."""
    g = (DEPTH, BINS)
    m = res.model_of_row[i]
    trees = jax.tree_util.tree_map(lambda a: np.asarray(a[m]), res.trees[g])
    cat = res.categorical[g]
    stats = {f: np.asarray(getattr(cat, f))[m] for f in ("sums", "counts", "prior", "prior_weight")}
    return trees, stats, np.asarray(res.model_borders[g][m])


def _assert_same(a, b, where):
    for name in ("features", "thresholds", "borders", "missing_right", "leaf_values"):
        np.testing.assert_array_equal(np.asarray(getattr(a, name)), np.asarray(getattr(b, name)),
                                      err_msg=f"{where}: {name}")


# --------------------------------------------------------------------------------------------
# Sweeps: each fold's model is its separate zero-weight fit.
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fold_fits(res, data):
    """Every row's separate fit: its training mask as sample weights, its held-out fold as the
    eval set, its seed's key, its configuration's settings (fit_kwargs)."""
    df, y = data
    fits = []
    for i in range(res.n_rows):
        w_train, w_valid = res.fold_weights(i)
        fits.append(jboost.fit(df, y, **res.fit_kwargs(res.config[i]), sample_weight=w_train,
                               eval_set=(df, y, w_valid), key=res.row_key(i)))
    return fits


@pytest.mark.slow
def test_every_fold_model_equals_its_separate_weighted_fit(res, fold_fits):
    assert res.n_rows == 2 * 3 and res.categorical[(DEPTH, BINS)].spec.kinds == ("numeric", "one_hot", "ctr")
    for i, one in enumerate(fold_fits):
        assert res.fit_kwargs(res.config[i])["cat_prior_weight"] == WEIGHTS[res.config[i]]
        trees, stats, borders = _row(res, i)
        # bitwise on CPU: the same statistics, borders, bins, trees and curves
        _assert_same(trees, one.trees, f"row {i}")
        np.testing.assert_array_equal(borders, np.asarray(one.borders), err_msg=f"row {i}")
        for f, v in stats.items():
            np.testing.assert_array_equal(v, np.asarray(getattr(one.categorical, f)), err_msg=f"row {i}: {f}")
        np.testing.assert_array_equal(res.train_curves[i], np.asarray(one.train_loss, np.float64))
        np.testing.assert_allclose(res.valid_curves[i], np.asarray(one.valid_loss), rtol=2e-6)
    # Each fold's default prior is its own training rows' positive rate (unstratified folds).
    assert len({float(_row(res, i)[1]["prior"][0]) for i in res.rows_of(0)}) == 3
    # The prior's weight reached the statistics: the two configurations' borders differ.
    assert not np.array_equal(_row(res, 0)[2], _row(res, 3)[2])


def test_held_out_labels_never_reach_the_fold_statistics(res, data):
    df, y = data
    folds = res.fold_table[0]
    flipped = y.copy()
    flipped[folds == 0] = 1.0 - flipped[folds == 0]
    pert = _sweep(df, flipped, folds=folds)
    assert pert.info["n_compilations"] == 0  # the fixture's program
    for i in range(res.n_rows):
        a, b = _row(res, i), _row(pert, i)
        if res.fold[i] == 0:  # trained without fold 0: its statistics and trees are unchanged
            _assert_same(a[0], b[0], f"row {i}")
            np.testing.assert_array_equal(a[2], b[2])
            for f in a[1]:
                np.testing.assert_array_equal(a[1][f], b[1][f], err_msg=f"row {i}: {f}")
        else:  # fold 0's labels are training labels of the others: their statistics change
            assert not np.array_equal(a[1]["sums"], b[1]["sums"]), i


def test_a_grid_over_the_prior_is_one_compilation(res):
    assert res.info["n_compilations"] == 1 and res.info["n_chunks"] == 2  # the fixture's trace
    assert res.swept == ("cat_prior_weight",)
    prior_weight = np.asarray(res.categorical[(DEPTH, BINS)].prior_weight)
    np.testing.assert_array_equal(prior_weight[res.model_of_row], np.repeat(WEIGHTS, 3).astype(np.float32))


def test_a_grid_over_the_prior_reuses_the_program_and_equals_separate_fits(res, data):
    df, y = data
    priors = _sweep(df, y, grid={"cat_prior": [0.2, 0.8]}, folds=res.fold_table[0])
    assert priors.info["n_compilations"] == 0  # the same program: the prior is traced
    prior = np.asarray(priors.categorical[(DEPTH, BINS)].prior)[priors.model_of_row, 0]
    np.testing.assert_array_equal(prior, np.repeat([0.2, 0.8], 3).astype(np.float32))
    i = 4  # configuration 1, fold 1
    w_train, w_valid = priors.fold_weights(i)
    one = jboost.fit(df, y, **priors.fit_kwargs(priors.config[i]), sample_weight=w_train,
                     eval_set=(df, y, w_valid), key=priors.row_key(i))
    assert float(one.categorical.prior[0]) == np.float32(0.8)
    _assert_same(_row(priors, i)[0], one.trees, f"row {i}")


def test_models_and_refit_predict_dataframes(res, fold_fits, data):
    df, y = data
    models = res.models(res.rows_of(1))
    assert models.batch_shape == (3,) and models.categorical is not None
    pred = np.asarray(jboost.predict(models, NEW))
    assert pred.shape == (3, 4) and np.all(np.isfinite(pred))
    np.testing.assert_array_equal(np.asarray(jboost.predict(models, NEW[["x", "color", "city"]])), pred)
    for j, i in enumerate(res.rows_of(1)):  # each fold's model predicts as its separate fit
        np.testing.assert_allclose(pred[j], np.asarray(jboost.predict(fold_fits[i], NEW)), rtol=1e-6,
                                   atol=1e-6)
    refit = res.refit(df, y, config=1, n_rounds=ROUNDS, eval_set=(df, y))  # all rows, its settings
    assert refit.categorical.spec == models.categorical.spec
    assert float(refit.categorical.prior_weight) == WEIGHTS[1]
    np.testing.assert_array_equal(np.asarray(refit.categorical.counts),
                                  np.bincount(categorical_lib.encode(refit.categorical.spec, df)[:, -1].astype(int),
                                              minlength=13))
    assert np.all(np.isfinite(np.asarray(jboost.predict(refit, NEW))))


# --------------------------------------------------------------------------------------------
# Bagged boosters: each bag's model is its separate weighted fit.
# --------------------------------------------------------------------------------------------


def _bags(df, y):
    return bagging.fit_bagged_boosters(df, y, "binomial_deviance", n_bags=3, key=5, eval_set="oob",
                                       **KW)


@pytest.fixture(scope="module")
def bags(data):
    return _bags(*data)


@pytest.fixture(scope="module")
def bag_fits(bags, data):
    return [_bag_fit(bags, *data, b) for b in range(3)]


def _bag_fit(model, df, y, b, **kw):
    """Bag ``b``'s separate fit: its bootstrap weights, its fitting key, its host borders."""
    spec = model.categorical.spec
    _, k_fit = bagging.bag_keys(jax.random.PRNGKey(5), b)
    h = spec.host_width
    borders = np.concatenate([np.asarray(model.borders[b][:h]),
                              np.full((len(spec.ctr_columns), BINS - 1), np.inf, np.float32)])
    w = np.asarray(model.bag_weights[b])
    return jboost.fit(df, y, "binomial_deviance", sample_weight=w, key=k_fit, borders=borders,
                      eval_set=(df, y, (w == 0).astype(np.float32)), **KW, **kw)


def test_each_bag_equals_its_separate_weighted_fit(bags, bag_fits):
    assert bags.borders.shape == (3, 5, BINS - 1) and bags.categorical.sums.shape == (3, 13, 1)
    raws = []
    for b, one in enumerate(bag_fits):
        _assert_same(jax.tree_util.tree_map(lambda a: a[b], bags.trees), one.trees, f"bag {b}")
        for f in ("sums", "counts", "prior", "prior_weight"):
            np.testing.assert_array_equal(np.asarray(getattr(bags.categorical, f))[b],
                                          np.asarray(getattr(one.categorical, f)), err_msg=f"bag {b}: {f}")
        np.testing.assert_array_equal(np.asarray(bags.valid_loss[b]), np.asarray(one.valid_loss))
        raws.append(np.asarray(jboost.predict(one, NEW)))
    # the bagged prediction from a DataFrame (reordered, unseen categories): the bags' mean
    np.testing.assert_allclose(np.asarray(jboost.predict(bags, NEW)), np.mean(raws, axis=0),
                               rtol=1e-6, atol=1e-6)


def test_out_of_bag_labels_never_reach_the_bag(bags, data):
    df, y = data
    out = np.asarray(bags.bag_weights[0]) == 0
    flipped = y.copy()
    flipped[out] = 1.0 - flipped[out]
    pert = _bags(df, flipped)
    _assert_same(jax.tree_util.tree_map(lambda a: a[0], bags.trees),
                 jax.tree_util.tree_map(lambda a: a[0], pert.trees), "bag 0")
    np.testing.assert_array_equal(np.asarray(bags.categorical.sums[0]), np.asarray(pert.categorical.sums[0]))
    assert not np.array_equal(np.asarray(bags.valid_loss[0]), np.asarray(pert.valid_loss[0]))  # scored on them
    for b in (1, 2):  # those rows are in the other bags: their statistics change
        assert not np.array_equal(np.asarray(bags.categorical.sums[b]), np.asarray(pert.categorical.sums[b]))


def test_bagged_predictions_from_dataframes(bags, data):
    df, y = data
    reordered = df[["color", "city", "x"]]
    outputs = np.asarray(bagging.bagged_outputs(bags, reordered))  # (B, n, 2) each bag's
    staged = np.asarray(jboost.staged_predict(bags, NEW))
    np.testing.assert_allclose(staged[-1, :, 0], np.asarray(jboost.predict(bags, NEW)), rtol=1e-6, atol=1e-6)
    # out-of-bag predictions: each row's mean over the bags that left it out
    oob = bagging.bagged_oob(bags, reordered, y)
    out = np.asarray(bags.bag_weights) == 0
    want = (outputs * out[..., None]).sum(0) / np.maximum(out.sum(0), 1)[:, None]
    seen = out.any(0)
    np.testing.assert_allclose(np.asarray(oob.prediction)[seen], want[seen], rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="categorical columns is not supported"):
        bagging.fit_bagged_boosters(df, y, "binomial_deviance", n_bags=3, init_model=bags, **KW)


# --------------------------------------------------------------------------------------------
# The entry points that take numeric columns only refuse categorical columns, naming the fix.
# --------------------------------------------------------------------------------------------


def _y3(n):
    return (np.arange(n) % 3).astype(np.float32)


@pytest.mark.parametrize("entry, call, match", [
    ("algorithms", lambda df, y: jboost.algorithms.gradient_boost(df, y, "binomial_deviance", n_rounds=2),
     r"non-numeric columns 'color'.*jboost.fit"),
    ("ecoc", lambda df, y: jboost.combine.ecoc.fit_ecoc_boosters(df, _y3(len(y)), jboost.combine.ecoc.exhaustive_code(3)),
     r"categorical columns \['color', 'city'\].*cat_features=.*fit_bagged_boosters"),
    ("stacking", lambda df, y: jboost.combine.stacking.fit_stacked_boosters(df, y, "binomial_deviance", hypers=[{}]),
     r"categorical columns \['color', 'city'\].*cat_features=.*fit_bagged_boosters"),
    ("forest", lambda df, y: bagging.fit_forest(df, y, n_trees=2),
     r"fit_forest takes numeric columns only.*fit_bagged_boosters.*get_dummies"),
])
def test_entry_points_without_cat_features_refuse_them(entry, call, match):
    df, y = _frame(n=30)
    with pytest.raises(TypeError, match=match):
        call(df, y)


def test_sweep_settings_of_categorical_columns_are_checked(data):
    df, y = data
    numeric = df[["x"]]
    with pytest.raises(ValueError, match="'cat_prior_weight'.*no categorical column.*cat_features="):
        sweep_lib.sweep(numeric, y, "binomial_deviance", grid={"cat_prior_weight": [1.0]}, **KW)
    with pytest.raises(ValueError, match=r"grid\['cat_prior_weight'\].*> 0"):
        sweep_lib.sweep(df, y, "binomial_deviance", grid={"cat_prior_weight": [0.0]}, **KW)
    with pytest.raises(ValueError, match="cat_prior_weight=-1"):
        sweep_lib.sweep(df, y, "binomial_deviance", cat_prior_weight=-1.0, **KW)
    assert categorical_lib.ONE_HOT_MAX_SIZE == 16  # the default the sweep and bagging share


def test_bagged_categorical_model_files_and_what_inspect_refuses(bags, data, tmp_path):
    """A bagged model with categorical columns saves and loads (its tables keep the bag axis)
    and predicts bitwise; SHAP values and partial dependence are refused (each bag encodes the
    rows with its own statistics), permutation importance is not."""
    df, y = data
    path = tmp_path / "bags.jbm"
    jboost.save(bags, path)
    loaded = jboost.load(path)
    assert loaded.categorical.sums.shape == bags.categorical.sums.shape
    np.testing.assert_array_equal(np.asarray(jboost.predict(loaded, NEW)), np.asarray(jboost.predict(bags, NEW)))
    with pytest.raises(TypeError, match="each bag encodes the rows"):
        jboost.inspect.shap_values(bags, df[:5])
    with pytest.raises(TypeError, match="each bag encodes the rows"):
        jboost.inspect.partial_dependence(bags, ["x"], df[:20])
