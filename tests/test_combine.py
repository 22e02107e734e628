"""Tests of jboost.combine: averages, simplex weights, folds and stacking, linear second tier, ECOC."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost import combine

# Boosting settings shared by every fit in this file (and by tests/test_bagging.py): one
# compilation of each program.
KW = dict(n_rounds=4, depth=2, learning_rate=0.5, n_bins=8)


# --------------------------------------------------------------------------------------------
# Averages.
# --------------------------------------------------------------------------------------------


def test_average_and_weighted_average_hand_computed():
    p = np.array([[1.0, 2.0], [3.0, 6.0], [5.0, 1.0]])
    np.testing.assert_allclose(combine.average(p), [3.0, 3.0])
    np.testing.assert_allclose(combine.weighted_average(p, [0.5, 0.25, 0.25]), [2.5, 2.75])
    with pytest.raises(ValueError, match=r"weights has shape \(2,\); expected \(3,\)"):
        combine.weighted_average(p, [0.5, 0.5])


def test_error_weights_are_exponential_in_the_error():
    w = np.asarray(combine.error_weights([0.1, 0.2, 0.4], beta=10.0))
    e = np.exp(-10 * np.array([0.1, 0.2, 0.4]))
    np.testing.assert_allclose(w, e / e.sum(), rtol=1e-6)
    np.testing.assert_allclose(combine.error_weights([0.1, 0.3], 0.0), [0.5, 0.5])
    # Traced beta: a vmapped sweep.
    ws = jax.vmap(lambda b: combine.error_weights(jnp.array([0.1, 0.3]), b))(jnp.array([0.0, 5.0]))
    np.testing.assert_allclose(ws[1], [1 / (1 + np.exp(-1.0)), 1 - 1 / (1 + np.exp(-1.0))], rtol=1e-6)


def test_simplex_weights_squared_error_interior_optimum():
    # Model 1 predicts +1, model 2 predicts -3, target 0: w - 3 (1 - w) = 0  =>  w = 3/4.
    p = np.array([[1.0, 1.0, 1.0, 1.0], [-3.0, -3.0, -3.0, -3.0]])
    fit = combine.fit_simplex_weights(p, np.zeros(4), n_steps=400, learning_rate=0.1)
    np.testing.assert_allclose(fit.weights, [0.75, 0.25], atol=2e-3)
    np.testing.assert_allclose(np.sum(fit.weights), 1.0, rtol=1e-6)
    assert fit.losses[-1] < 1e-4 < fit.losses[0]


def test_simplex_weights_log_loss_hand_computed():
    # P(class 0): model 1 says 0.9, model 2 says 0.1; 3/4 of the labels are 0. The mixture
    # matches 0.75 when 0.9 w + 0.1 (1 - w) = 0.75, i.e. w = 0.8125.
    y = np.array([0, 0, 0, 1], np.float32)
    p1 = np.tile([0.9, 0.1], (4, 1))
    p2 = np.tile([0.1, 0.9], (4, 1))
    fit = combine.fit_simplex_weights(np.stack([p1, p2]), y, objective="log_loss", n_steps=400,
                                      learning_rate=0.1)
    np.testing.assert_allclose(fit.weights, [0.8125, 0.1875], atol=3e-3)
    with pytest.raises(ValueError, match="objective='hinge' must be one of"):
        combine.fit_simplex_weights(np.stack([p1, p2]), y, objective="hinge")


# --------------------------------------------------------------------------------------------
# Folds and the linear second tier.
# --------------------------------------------------------------------------------------------


def test_fold_masks_hold_each_row_out_exactly_once():
    masks = np.asarray(combine.fold_masks(jax.random.PRNGKey(0), 23, 4))
    assert masks.shape == (4, 23)
    np.testing.assert_array_equal((masks == 0).sum(0), 1)
    sizes = (masks == 0).sum(1)
    assert sizes.max() - sizes.min() <= 1
    per_fold = np.arange(4)[:, None] * 100.0 + np.arange(23)[None, :]   # fold k, row i -> 100k + i
    oof = np.asarray(combine.out_of_fold(per_fold, masks))
    held = np.argmin(masks, axis=0)
    np.testing.assert_array_equal(oof, held * 100.0 + np.arange(23))
    assert np.all(masks[held, np.arange(23)] == 0)
    with pytest.raises(ValueError, match="n_folds=1 must be >= 2"):
        combine.fold_masks(jax.random.PRNGKey(0), 5, 1)


def test_fit_linear_matches_least_squares_and_sklearn_logistic():
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((80, 3)).astype(np.float32)
    y = (Z @ np.array([1.0, -2.0, 0.5]) + 0.3 + 0.1 * rng.standard_normal(80)).astype(np.float32)
    lin = combine.fit_linear(Z, y, task="regression", l2=0.0, n_steps=50)
    A = np.hstack([Z, np.ones((80, 1))])
    ref = np.linalg.lstsq(A, y, rcond=None)[0]
    np.testing.assert_allclose(lin.coef[:, 0], ref[:3], atol=1e-3)
    np.testing.assert_allclose(lin.intercept[0], ref[3], atol=1e-3)

    from sklearn.linear_model import LogisticRegression
    yb = (Z[:, 0] - Z[:, 1] + 0.5 * rng.standard_normal(80) > 0).astype(np.float32)
    l2 = 0.05
    logit = combine.fit_linear(Z, yb, task="binary", l2=l2, n_steps=100)
    sk = LogisticRegression(C=1.0 / (l2 * 80), tol=1e-10, max_iter=10000).fit(Z, yb)
    np.testing.assert_allclose(logit.coef[:, 0], sk.coef_[0], atol=2e-3)
    np.testing.assert_allclose(logit.intercept[0], sk.intercept_[0], atol=2e-3)
    with pytest.raises(ValueError, match="task='poisson' must be one of"):
        combine.fit_linear(Z, y, task="poisson")


# --------------------------------------------------------------------------------------------
# Stacking.
# --------------------------------------------------------------------------------------------


def test_stacking_out_of_fold_predictions_never_see_their_row():
    """A memorising feature (the row id) and 25% flipped labels: in-sample raw scores follow the
    flipped labels; out-of-fold scores must follow the clean signal instead."""
    rng = np.random.default_rng(0)
    n = 120
    signal = rng.standard_normal(n).astype(np.float32)
    clean = (signal > 0).astype(np.float32)
    flipped = np.zeros(n, bool)
    flipped[rng.choice(n, 30, replace=False)] = True
    y = np.where(flipped, 1.0 - clean, clean).astype(np.float32)
    X = np.stack([np.arange(n, dtype=np.float32), signal, rng.standard_normal(n).astype(np.float32),
                  rng.standard_normal(n).astype(np.float32)], 1)
    kw = dict(KW, n_rounds=12, depth=3, n_bins=128, learning_rate=1.0)
    model = combine.fit_stacked_boosters(
        X, y, "binomial_deviance", hypers=[dict(learning_rate=1.0, l2=0.01, min_child_weight=0.0),
                                           dict(learning_rate=0.3, l2=1.0, min_child_weight=0.0)],
        n_folds=4, stacker_l2=1e-2, key=1, **{k: v for k, v in kw.items() if k != "learning_rate"})
    assert model.oof_raw.shape == (n, 2, 1)
    oof = np.asarray(model.oof_raw[:, 0, 0])
    insample = np.asarray(combine.raw_scores(model.trees, model.baseline, jnp.asarray(X), 1)[0, :, 0])
    # In sample, the flipped rows are (partly) memorised: the score follows the noisy label.
    agree_in = np.mean((insample[flipped] > 0) == (y[flipped] == 1))
    agree_oof = np.mean((oof[flipped] > 0) == (y[flipped] == 1))
    assert agree_in > 0.6, agree_in
    assert agree_oof < 0.35, agree_oof
    # Each row's out-of-fold score is that of a fold model with zero weight on the row:
    # refit fold k's first learner alone with jboost.fit and compare on its held-out rows.
    k_folds, k_fit = jax.random.split(jax.random.PRNGKey(1))
    masks = np.asarray(combine.fold_masks(k_folds, n, 4))
    held = np.argmin(masks, axis=0)
    ref = jboost.fit(X, y, "binomial_deviance", sample_weight=masks[0], borders=model.borders,
                     key=jax.random.fold_in(k_fit, 0), l2=0.01, min_child_weight=0.0,
                     **dict(kw, learning_rate=1.0))
    np.testing.assert_allclose(oof[held == 0], np.asarray(jboost.predict(ref, X))[held == 0],
                               rtol=1e-4, atol=1e-4)
    # The stacked model predicts the clean signal better than chance.
    p = np.asarray(combine.stacked_predict(model, X))
    assert p.shape == (n, 2)
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-5)
    assert np.mean((p[:, 1] > 0.5) == (clean == 1)) > 0.8


# --------------------------------------------------------------------------------------------
# Error-correcting output codes.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [3, 4, 5])
def test_exhaustive_code_properties(k):
    code = combine.exhaustive_code(k)
    assert code.shape == (k, 2 ** (k - 1) - 1)
    np.testing.assert_array_equal(code[0], 1)
    for a, b in itertools.combinations(range(k), 2):
        assert np.sum(code[a] != code[b]) == 2 ** (k - 2)
    cols = {tuple(c) for c in code.T}
    assert len(cols) == code.shape[1]
    assert all(0 < sum(c) < k for c in cols)
    assert all(tuple(1 - np.array(c)) not in cols for c in cols)
    assert int(combine.min_row_distance(code)) == 2 ** (k - 2)


def test_exhaustive_code_for_three_classes_by_hand():
    np.testing.assert_array_equal(combine.exhaustive_code(3), [[1, 1, 1], [0, 0, 1], [0, 1, 0]])
    with pytest.raises(ValueError, match="n_classes=2 must be an int in"):
        combine.exhaustive_code(2)


def test_random_code_is_admissible_and_well_separated():
    code = np.asarray(combine.random_code(jax.random.PRNGKey(0), 6, 12))
    assert code.shape == (6, 12)
    s = code.sum(0)
    assert np.all((s > 0) & (s < 6))
    cols = [tuple(c) for c in code.T]
    assert len(set(cols)) == 12 and not any(tuple(1 - np.array(c)) in cols for c in cols)
    assert int(combine.min_row_distance(code)) >= 4
    # The best candidate beats a typical single draw.
    single = np.asarray(combine.random_code(jax.random.PRNGKey(0), 6, 12, n_candidates=1))
    assert int(combine.min_row_distance(code)) >= int(combine.min_row_distance(single))


def test_decoding_on_a_known_code_matrix():
    code = combine.exhaustive_code(4)  # rows 4 apart: one wrong bit is corrected
    np.testing.assert_array_equal(combine.ecoc_targets(np.array([0, 3, 1]), code),
                                  np.stack([code[0], code[3], code[1]]).T)
    raw = np.where(code == 1, 2.0, -2.0)           # perfect bit scores for classes 0..3
    raw[2, 5] *= -1                                # one wrong bit for class 2
    np.testing.assert_array_equal(combine.decode_hamming(raw, code), [0, 1, 2, 3])
    probs = np.array([[0.9, 0.8, 0.7, 0.9, 0.6, 0.8, 0.55],     # near class 0 (all ones)
                      [0.1, 0.2, 0.3, 0.1, 0.2, 0.3, 0.45]])    # far from every codeword
    d = np.abs(probs[:, None, :] - code[None]).sum(-1)
    np.testing.assert_array_equal(combine.decode_l1(probs, code), d.argmin(1))
    assert int(combine.decode_l1(probs, code)[0]) == 0
    # Hand case: bit probabilities (0.1, 0.1, 0.1, 0.1, 0.9, 0.9, 0.9) are closest to class 1.
    assert int(combine.decode_l1(np.array([[0.1] * 4 + [0.9] * 3]), code)[0]) == 1


def test_ecoc_bits_are_vmapped_binary_boosters():
    rng = np.random.default_rng(3)
    n = 120
    X = rng.standard_normal((n, 4)).astype(np.float32)
    y = np.digitize(X[:, 0] + 0.3 * X[:, 1], [-0.5, 0.5]).astype(np.float32)  # 3 ordered classes
    code = combine.exhaustive_code(3)
    key = jax.random.PRNGKey(4)
    model = combine.fit_ecoc_boosters(X, y, code, key=key, chunk_size=2, **KW)
    assert model.trees.features.shape == (3, 4, 1, 2)
    raw = np.asarray(combine.ecoc_bit_scores(model, X))
    for bit in range(code.shape[1]):
        yl = code[y.astype(int), bit].astype(np.float32)
        ref = jboost.fit(X, yl, "binomial_deviance", key=jax.random.fold_in(key, bit),
                         borders=model.borders, **KW)
        np.testing.assert_array_equal(model.trees.features[bit], ref.trees.features)
        np.testing.assert_allclose(raw[:, bit], jboost.predict(ref, X), rtol=1e-4, atol=1e-5)
    acc_l1 = np.mean(np.asarray(combine.ecoc_predict(model, X, "l1")) == y)
    acc_h = np.mean(np.asarray(combine.ecoc_predict(model, X, "hamming")) == y)
    assert acc_l1 > 0.75 and acc_h > 0.6, (acc_l1, acc_h)
    with pytest.raises(ValueError, match="decoding='vote' must be"):
        combine.ecoc_predict(model, X, "vote")
