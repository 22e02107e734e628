"""Tests of jboost.combine.ecoc: codes, decoding, the bit learners and the ECOC model protocol."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost import combine
from jboost.combine import ecoc as ecoc_lib
from jboost.models import ecoc as ecoc_mod

# Boosting settings shared by every fit in this file (and by tests/test_stacking.py): one
# compilation of each program.
KW = dict(n_rounds=4, depth=2, learning_rate=0.5, n_bins=8)
KEY = jax.random.PRNGKey(4)
# The members of jboost.models.base.Model.
PROTOCOL = ("trees", "n_features", "task", "batch_shape", "n_stages", "raw_scores", "proba_from_raw",
            "classes_from_raw", "staged")


@pytest.fixture(scope="module")
def letters():
    """120 rows, 4 features, 3 ordered classes."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((120, 4)).astype(np.float32)
    y = np.digitize(X[:, 0] + 0.3 * X[:, 1], [-0.5, 0.5]).astype(np.float32)
    return X, y


@pytest.fixture(scope="module")
def model(letters):
    X, y = letters
    return ecoc_lib.fit_ecoc_boosters(X, y, ecoc_lib.exhaustive_code(3), key=KEY, chunk_size=2, **KW)


# --------------------------------------------------------------------------------------------
# Codes and decoding.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [3, 4, 5])
def test_exhaustive_code_properties(k):
    code = ecoc_lib.exhaustive_code(k)
    assert code.shape == (k, 2 ** (k - 1) - 1)
    np.testing.assert_array_equal(code[0], 1)
    for a, b in itertools.combinations(range(k), 2):
        assert np.sum(code[a] != code[b]) == 2 ** (k - 2)
    cols = {tuple(c) for c in code.T}
    assert len(cols) == code.shape[1]
    assert all(0 < sum(c) < k for c in cols)
    assert all(tuple(1 - np.array(c)) not in cols for c in cols)
    assert int(ecoc_lib.min_row_distance(code)) == 2 ** (k - 2)


def test_exhaustive_code_for_three_classes_by_hand():
    np.testing.assert_array_equal(ecoc_lib.exhaustive_code(3), [[1, 1, 1], [0, 0, 1], [0, 1, 0]])
    with pytest.raises(ValueError, match=r"n_classes=2 must be in \[3, 11\]"):
        ecoc_lib.exhaustive_code(2)
    with pytest.raises(TypeError, match="n_classes must be an int"):
        ecoc_lib.exhaustive_code(3.0)


def test_random_code_is_admissible_and_well_separated():
    code = np.asarray(ecoc_lib.random_code(jax.random.PRNGKey(0), 6, 12))
    assert code.shape == (6, 12)
    s = code.sum(0)
    assert np.all((s > 0) & (s < 6))
    cols = [tuple(c) for c in code.T]
    assert len(set(cols)) == 12 and not any(tuple(1 - np.array(c)) in cols for c in cols)
    assert int(ecoc_lib.min_row_distance(code)) >= 4
    # The best candidate beats a typical single draw.
    single = np.asarray(ecoc_lib.random_code(jax.random.PRNGKey(0), 6, 12, n_candidates=1))
    assert int(ecoc_lib.min_row_distance(code)) >= int(ecoc_lib.min_row_distance(single))
    # An int seed is the key PRNGKey(seed).
    np.testing.assert_array_equal(ecoc_lib.random_code(0, 6, 12), code)
    with pytest.raises(ValueError, match=r"n_bits=0 must be in \[1, "):
        ecoc_lib.random_code(0, 6, 0)


def test_decoding_on_a_known_code_matrix():
    code = ecoc_lib.exhaustive_code(4)  # rows 4 apart: one wrong bit is corrected
    np.testing.assert_array_equal(ecoc_lib.ecoc_targets(np.array([0, 3, 1]), code),
                                  np.stack([code[0], code[3], code[1]]).T)
    raw = np.where(code == 1, 2.0, -2.0)           # perfect bit scores for classes 0..3
    raw[2, 5] *= -1                                # one wrong bit for class 2
    np.testing.assert_array_equal(ecoc_mod.decode_hamming(raw, code), [0, 1, 2, 3])
    np.testing.assert_array_equal(ecoc_mod.decode(raw, code, "hamming"), [0, 1, 2, 3])
    probs = np.array([[0.9, 0.8, 0.7, 0.9, 0.6, 0.8, 0.55],     # near class 0 (all ones)
                      [0.1, 0.2, 0.3, 0.1, 0.2, 0.3, 0.45]])    # far from every codeword
    d = np.abs(probs[:, None, :] - code[None]).sum(-1)
    np.testing.assert_array_equal(ecoc_mod.decode_l1(probs, code), d.argmin(1))
    assert int(ecoc_mod.decode_l1(probs, code)[0]) == 0
    # Hand case: bit probabilities (0.1, 0.1, 0.1, 0.1, 0.9, 0.9, 0.9) are closest to class 1.
    assert int(ecoc_mod.decode_l1(np.array([[0.1] * 4 + [0.9] * 3]), code)[0]) == 1
    # decode "l1" is decode_l1 on the sigmoid of the log-odds.
    logodds = np.log(probs / (1 - probs))
    np.testing.assert_array_equal(ecoc_mod.decode(logodds, code), d.argmin(1))
    with pytest.raises(ValueError, match="decoding='vote' must be one of"):
        ecoc_mod.decode(raw, code, "vote")


# --------------------------------------------------------------------------------------------
# The bit learners.
# --------------------------------------------------------------------------------------------


def test_ecoc_bits_are_vmapped_binary_boosters(letters, model):
    X, y = letters
    code = ecoc_lib.exhaustive_code(3)
    assert model.trees.features.shape == (3, 4, 1, 2)
    raw = np.asarray(ecoc_mod.ecoc_bit_scores(model, X))
    for bit in range(code.shape[1]):
        yl = code[y.astype(int), bit].astype(np.float32)
        ref = jboost.fit(X, yl, "binomial_deviance", key=jax.random.fold_in(KEY, bit),
                         borders=model.borders, **KW)
        np.testing.assert_array_equal(model.trees.features[bit], ref.trees.features)
        np.testing.assert_allclose(raw[:, bit], jboost.predict(ref, X), rtol=1e-4, atol=1e-5)
    acc_l1 = np.mean(np.asarray(ecoc_mod.ecoc_predict(model, X, "l1")) == y)
    acc_h = np.mean(np.asarray(ecoc_mod.ecoc_predict(model, X, "hamming")) == y)
    assert acc_l1 > 0.75 and acc_h > 0.6, (acc_l1, acc_h)
    with pytest.raises(ValueError, match="decoding='vote' must be one of"):
        ecoc_mod.ecoc_predict(model, X, "vote")


def test_chunks_and_sample_weights(letters, model):
    """All bits in one chunk give the trees of chunks of 2; zero weights on some rows give the
    fit without those rows (weighted borders, baselines and histograms ignore them)."""
    X, y = letters
    code = ecoc_lib.exhaustive_code(3)
    one_chunk = ecoc_lib.fit_ecoc_boosters(X, y, code, key=KEY, **KW)
    np.testing.assert_array_equal(one_chunk.trees.features, model.trees.features)
    np.testing.assert_allclose(one_chunk.trees.leaf_values, model.trees.leaf_values, rtol=1e-5, atol=1e-6)
    zero_last = np.ones(len(y), np.float32)
    zero_last[-30:] = 0.0
    weighted = ecoc_lib.fit_ecoc_boosters(X, y, code, key=KEY, sample_weight=zero_last, chunk_size=2, **KW)
    dropped = ecoc_lib.fit_ecoc_boosters(X[:-30], y[:-30], code, key=KEY, chunk_size=2, **KW)
    np.testing.assert_array_equal(weighted.borders, dropped.borders)
    np.testing.assert_array_equal(weighted.trees.features, dropped.trees.features)
    np.testing.assert_allclose(weighted.baseline, dropped.baseline, rtol=1e-5)
    np.testing.assert_allclose(weighted.trees.leaf_values, dropped.trees.leaf_values, rtol=1e-4, atol=1e-6)
    assert not np.allclose(weighted.baseline, model.baseline, rtol=1e-3)


def test_verbose_ecoc_reports_each_chunk_of_bits_and_fits_the_same_model(letters, model, capsys):
    """verbose=True prints a line as each chunk of bits finishes (bits done, elapsed and
    remaining time, while the program runs); the model is bitwise the quiet fit's."""
    X, y = letters
    loud = ecoc_lib.fit_ecoc_boosters(X, y, ecoc_lib.exhaustive_code(3), key=KEY, chunk_size=2, verbose=True, **KW)
    jax.block_until_ready(loud.trees)
    for a, b in zip(jax.tree_util.tree_leaves(loud), jax.tree_util.tree_leaves(model)):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("[jboost] ecoc: bits")]
    assert [l.split()[3:6] for l in lines] == [["2/3", "(chunk", "1/2)"], ["3/3", "(chunk", "2/2)"]]
    assert all("elapsed" in l and "left" in l for l in lines)


# --------------------------------------------------------------------------------------------
# The model protocol.
# --------------------------------------------------------------------------------------------


def test_every_protocol_function_on_ecoc(letters, model):
    X, y = letters
    assert all(hasattr(model, a) for a in PROTOCOL)
    assert model.task == "multiclass" and model.batch_shape == () and model.n_stages == 4
    assert (model.n_features, model.n_classes, model.n_bits) == (4, 3, 3)
    raw = np.asarray(jboost.predict(model, X))
    assert raw.shape == (len(X), 3)
    np.testing.assert_array_equal(raw, np.asarray(ecoc_mod.ecoc_bit_scores(model, X)))
    # predict_class: nearest codeword in L1 distance on the bits' probabilities.
    labels = np.asarray(jboost.predict_class(model, X))
    p = 1 / (1 + np.exp(-raw.astype(np.float64)))
    d = np.abs(p[:, None, :] - np.asarray(model.code)[None]).sum(-1)
    np.testing.assert_array_equal(labels, d.argmin(1))
    np.testing.assert_array_equal(labels, np.asarray(ecoc_mod.ecoc_predict(model, X)))
    with pytest.raises(ValueError, match="ECOC ensemble has no calibrated class probabilities"):
        jboost.predict_proba(model, X)
    with pytest.raises(TypeError, match="predict_mean needs a model with a loss"):
        jboost.predict_mean(model, X)
    imp = np.asarray(jboost.feature_importance(model))
    gains = np.bincount(np.asarray(model.trees.features).ravel(),
                        np.asarray(model.trees.gains).ravel(), minlength=4)
    np.testing.assert_allclose(imp, gains / gains.sum(), rtol=1e-5)
    # Stages: rounds of every bit learner; stage m is predict(n_rounds=m), bit for bit.
    staged = np.asarray(jboost.staged_predict(model, X))
    assert staged.shape == (4, len(X), 3)
    for m in range(1, 5):
        first = np.asarray(jboost.predict(model, X, n_rounds=m))
        np.testing.assert_array_equal(staged[m - 1], first)
        np.testing.assert_array_equal(
            jboost.predict_class(model, X, n_rounds=m),
            ecoc_mod.decode(first, model.code))
    np.testing.assert_array_equal(staged[-1], raw)
    # Device arrays, zero rows, wrong columns.
    np.testing.assert_array_equal(np.asarray(jboost.predict(model, jnp.asarray(X))), raw)
    assert jboost.predict_class(model, X[:0]).shape == (0,)
    with pytest.raises(ValueError, match=r"X has 3 features, but the model was fitted on 4"):
        jboost.predict(model, X[:, :3])
    with pytest.raises(ValueError, match=r"X has 3 features, but the model was fitted on 4"):
        ecoc_mod.ecoc_predict(model, X[:, :3], "hamming")
    with pytest.raises(ValueError, match=r"n_rounds=5 must be in \[0, 4\]"):
        jboost.predict(model, X, n_rounds=5)


@pytest.mark.slow
def test_shap_of_an_early_stopped_ecoc_model_adds_up_to_its_predictions(letters, model):
    """Local accuracy: an early-stopped model's SHAP values explain the rounds it predicts with
    (each bit's rounds up to its own best round)."""
    X, y = letters
    stopped = model._replace(best_round=jnp.asarray([0, 2, 1], jnp.int32))
    fitted = ecoc_lib.fit_ecoc_boosters(X[:80], y[:80], ecoc_lib.exhaustive_code(3), key=KEY,
                                        eval_set=(X[80:], y[80:]), early_stopping_rounds=1,
                                        **{**KW, "learning_rate": 2.0})
    assert fitted.best_round is not None
    for m in (stopped, fitted):
        values, expected = jboost.inspect.shap_values(m, X[:20])
        np.testing.assert_allclose(np.sum(values, axis=1) + expected, jboost.predict(m, X[:20]),
                                   rtol=1e-5, atol=1e-5)
    assert not np.allclose(jboost.predict(stopped, X), jboost.predict(model, X))


def test_a_vmapped_batch_of_ecoc_models_predicts_outside_vmap(letters, model):
    X, y = letters
    code = ecoc_lib.exhaustive_code(3)
    kw = {k: v for k, v in KW.items() if k != "learning_rate"}
    rates = jnp.array([0.5, 0.2])
    batch = jax.vmap(lambda lr: ecoc_lib.fit_ecoc_boosters(X, y, code, key=KEY, chunk_size=2,
                                                       learning_rate=lr, **kw))(rates)
    assert batch.batch_shape == (2,)
    raw = np.asarray(jboost.predict(batch, X))
    labels = np.asarray(jboost.predict_class(batch, X))
    hamming = np.asarray(ecoc_mod.ecoc_predict(batch, X, "hamming"))
    assert raw.shape == (2, len(X), 3) and labels.shape == hamming.shape == (2, len(X))
    np.testing.assert_allclose(raw[0], np.asarray(jboost.predict(model, X)), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(hamming[0], np.asarray(ecoc_mod.ecoc_predict(model, X, "hamming")))
    np.testing.assert_array_equal(labels[1], np.asarray(ecoc_mod.decode(raw[1], code)))


def test_fit_ecoc_boosters_checks_like_fit(letters):
    X, y = letters
    code = ecoc_lib.exhaustive_code(3)
    with pytest.raises(ValueError, match=r"code must hold only 0 and 1; got values such as \[2\]"):
        ecoc_lib.fit_ecoc_boosters(X, y, code * 2, **KW)
    with pytest.raises(ValueError, match=r"code must be a \(n_classes >= 2, n_bits >= 1\) 0/1 matrix"):
        ecoc_lib.fit_ecoc_boosters(X, y, code[0], **KW)
    with pytest.raises(ValueError, match=r"y must hold class labels in \[0, 2\) for n_classes=2"):
        ecoc_lib.fit_ecoc_boosters(X, y, code[:2], **KW)
    with pytest.raises(ValueError, match=r"y holds 3 classes \[0.5, 1.5, 2.5\] .* but code has 2 rows"):
        ecoc_lib.fit_ecoc_boosters(X, y + 0.5, code[:2], **KW)  # other labels are mapped (classes_)
    # The settings are checked by jboost.fitting.settings.settings: the messages of jboost.fit.
    for bad, exc in ((dict(learning_rate=-1.0), ValueError), (dict(depth=0), ValueError),
                     (dict(subsample=1.5), ValueError), (dict(n_bins=2.5), TypeError),
                     (dict(colsample_by="forest"), ValueError)):
        with pytest.raises(exc) as ours:
            ecoc_lib.fit_ecoc_boosters(X, y, code, **dict(KW, **bad))
        with pytest.raises(exc) as fits:
            jboost.fit(X, y, "multinomial_deviance", **dict(KW, **bad))
        assert str(ours.value) == str(fits.value)
    with pytest.raises(ValueError, match="sample_weight must be non-negative"):
        ecoc_lib.fit_ecoc_boosters(X, y, code, sample_weight=-np.ones(len(y)), **KW)
    with pytest.raises(ValueError, match=r"chunk_size=0 must be in \[1, "):
        ecoc_lib.fit_ecoc_boosters(X, y, code, chunk_size=0, **KW)
    with pytest.raises(TypeError, match="key must be an int seed or a jax.random key"):
        ecoc_lib.fit_ecoc_boosters(X, y, code, key="seven", **KW)
    assert combine.fit_ecoc_boosters is ecoc_lib.fit_ecoc_boosters
