"""Batch objectives (issue 16 part 4, :mod:`jboost.objectives`): Cox's partial likelihood with
Breslow and Efron ties, listwise ranking, a user-written batch loss; gradients against finite
differences, hessian diagonals against the brute-force ``jax.hessian``, the losses against
hand computations, and fits end to end."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost.losses import derivatives
from jboost import losses
from jboost import objectives

RNG = np.random.default_rng(0)
N = 24
F_SCORES = jnp.asarray(RNG.normal(size=N), jnp.float32)
W = jnp.asarray(RNG.uniform(0.5, 2.0, size=N), jnp.float32)
TIES = np.stack([RNG.integers(1, 7, size=N), RNG.uniform(size=N) < 0.7], 1).astype(np.float32)
QUERIES = np.repeat(np.arange(6), [2, 5, 3, 6, 4, 4]).astype(np.float32)   # uneven groups
RANKS = np.stack([RNG.integers(0, 4, size=N), QUERIES], 1).astype(np.float32)


def _cox_by_hand(y, f, w, efron):
    """The weighted partial likelihood, one tie block at a time (float64 loops)."""
    t, d = y[:, 0], y[:, 1]
    f, w = np.asarray(f, np.float64), np.asarray(w, np.float64)
    total = 0.0
    for time in np.unique(t[d > 0]):
        dead = (t == time) & (d > 0)
        at_risk = w[t >= time] @ np.exp(f[t >= time])
        tied = w[dead] @ np.exp(f[dead])
        m = int(dead.sum())
        total -= w[dead] @ f[dead]
        for l in range(m):
            share = l / m if efron else 0.0
            total += w[dead].mean() * np.log(at_risk - share * tied) if efron else 0.0
        if not efron:
            total += w[dead].sum() * np.log(at_risk)
    return total


@pytest.mark.parametrize("ties", ["breslow", "efron"])
def test_cox_value_gradient_and_exact_hessian_diagonal(ties):
    loss = objectives.cox(ties)
    y = jnp.asarray(TIES)
    shifts = jnp.concatenate([jnp.zeros((1, N)), 1e-2 * jnp.eye(N)[::5], -1e-2 * jnp.eye(N)[::5]])
    # One program: the loss at the scores and at central finite-difference steps, the gradient,
    # the autodiff route of the diagonal and the full hessian (brute force).
    values, g, diag, hess = jax.jit(lambda f: (
        jax.vmap(lambda d: loss.fn(y, f + d, W))(shifts), jax.grad(lambda v: loss.fn(y, v, W))(f),
        loss.hessian_diag(y, f, W), jax.hessian(lambda v: loss.fn(y, v, W))(f)))(F_SCORES)
    values = np.asarray(values, np.float64)
    np.testing.assert_allclose(values[0], _cox_by_hand(TIES, F_SCORES, W, ties == "efron"),
                               rtol=1e-5)
    k = len(range(0, N, 5))
    fd = (values[1:1 + k] - values[1 + k:]) / 2e-2
    np.testing.assert_allclose(np.asarray(g)[::5], fd, atol=2e-3)
    # The autodiff route of the diagonal == the diagonal of the full hessian (ties and weights).
    np.testing.assert_allclose(diag, np.diag(np.asarray(hess)), rtol=1e-5, atol=1e-6)


def test_breslow_equals_efron_without_ties():
    distinct = jnp.asarray(np.stack([RNG.permutation(N) + 1.0, TIES[:, 1]], 1), jnp.float32)
    b, e = objectives.cox("breslow"), objectives.cox("efron")
    both = jax.jit(lambda y: [(c.fn(y, F_SCORES, W), c.hessian_diag(y, F_SCORES, W)) for c in (b, e)])
    (vb, db), (ve, de) = both(distinct)
    assert float(vb) == pytest.approx(float(ve), rel=1e-6)
    np.testing.assert_allclose(db, de, rtol=1e-6)
    (vb, _), (ve, _) = both(jnp.asarray(TIES))
    assert float(vb) > float(ve)   # ties: Efron's smaller denominators for the later tied events


def _ranking_by_hand(y, f, w, kind):
    """Per query, in float64 loops: the softmax cross entropy or the NDCG-weighted pair loss."""
    f, w = np.asarray(f, np.float64), np.asarray(w, np.float64)
    total = 0.0
    for q in np.unique(y[:, 1]):
        rows = np.flatnonzero(y[:, 1] == q)
        rel, s, v = y[rows, 0], f[rows], w[rows]
        gain = 2.0**rel - 1
        if kind == "softmax":
            if gain.sum() > 0:
                target = v * gain / (v * gain).sum()
                total -= target @ (s - np.log(v @ np.exp(s)))
            continue
        rank = np.empty(len(rows))
        rank[np.argsort(-s, kind="stable")] = np.arange(1, len(rows) + 1)
        idcg = np.sort(gain)[::-1] @ (1 / np.log2(np.arange(2, len(rows) + 2)))
        for i in range(len(rows)):
            for j in range(len(rows)):
                if rel[i] > rel[j]:
                    delta = abs(gain[i] - gain[j]) * abs(1 / np.log2(1 + rank[i]) - 1 / np.log2(1 + rank[j]))
                    total += v[i] * v[j] * delta / idcg * np.log1p(np.exp(-(s[i] - s[j])))
    return total


@pytest.mark.parametrize("kind", ["softmax", "lambdarank"])
def test_ranking_loss_by_hand_and_group_hessian_diagonal(kind):
    loss = objectives.ranking(kind).replace(max_group=6, label_columns=2)
    y = jnp.asarray(RANKS)
    shifts = jnp.concatenate([jnp.zeros((1, N)), 1e-2 * jnp.eye(N)[::5], -1e-2 * jnp.eye(N)[::5]])
    f = lambda r: losses.total_loss(loss, y, r[:, None], W)
    # One program: values at central finite-difference steps, the gradient and the 6-probe
    # diagonal (one probe per position in a group), and the full hessian (brute force).
    values, (g, h), hess = jax.jit(lambda s: (
        jax.vmap(lambda d: f(s + d))(shifts), derivatives.batch_grad_hess(loss, y, s[:, None], W),
        jax.hessian(f)(s)))(F_SCORES)
    values = np.asarray(values, np.float64)
    np.testing.assert_allclose(values[0], _ranking_by_hand(RANKS, F_SCORES, W, kind), rtol=1e-5)
    k = len(range(0, N, 5))
    np.testing.assert_allclose(np.asarray(g)[::5, 0], (values[1:1 + k] - values[1 + k:]) / 2e-2,
                               atol=2e-3)
    np.testing.assert_allclose(h[:, 0], np.diag(np.asarray(hess)), rtol=1e-5, atol=1e-7)


def test_exact_and_hutchinson_diagonals_of_a_user_batch_loss():
    y = jnp.asarray(TIES)
    exact = objectives.batch_loss(objectives.cox_efron_fn, task="survival")
    est = exact.replace(hessian_diag="hutchinson", n_probes=4096)
    diag = lambda loss, key: derivatives.batch_grad_hess(loss, y, F_SCORES[:, None], W, key)[1][:, 0]
    full, exact_diag, h = jax.jit(lambda key: (
        jax.hessian(lambda f: objectives.cox_efron_fn(y, f, W))(F_SCORES), diag(exact, None),
        diag(est, key)))(jax.random.PRNGKey(3))
    full = np.asarray(full)
    brute = np.diag(full)
    np.testing.assert_allclose(exact_diag, brute, rtol=1e-5, atol=1e-6)
    # Hutchinson: unbiased; entry i's standard deviation is sqrt(sum_{j != i} H_ij^2 / probes).
    sd = np.sqrt((np.sum(full**2, axis=1) - brute**2) / 4096)
    assert np.all(np.abs(h - brute) <= 4 * sd + 1e-6)
    assert not np.allclose(h, brute, rtol=1e-4)  # an estimate, not the diagonal


def _survival(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)).astype(np.float32)
    event_time = rng.exponential(np.exp(-(X[:, 0] - 0.5 * X[:, 1])))
    censor = rng.exponential(1.5, size=n)
    y = np.stack([np.round(np.minimum(event_time, censor), 2) + 0.01, event_time <= censor], 1)
    return X, y.astype(np.float32)


@pytest.mark.slow
def test_cox_fit_predicts_risks_and_round_trips(tmp_path):
    X, y = _survival(200, 0)
    m = jboost.fit(X[:100], y[:100], objectives.cox("efron"), n_rounds=6, depth=2,
                   learning_rate=0.3)
    assert np.all(np.diff(np.asarray(m.train_loss)) < 0)
    risk = jboost.predict(m, X[100:])
    assert risk.shape == (100,) and objectives.concordance_index(y[100:], risk) > 0.65
    path = os.path.join(tmp_path, "cox.jbm")
    jboost.save(m, path)
    assert np.array_equal(jboost.predict(jboost.load(path), X), jboost.predict(m, X))
    # The user writes only the loss: the same objective through the generic exact diagonal.
    user = jboost.fit(X[:100], y[:100], objectives.batch_loss(objectives.cox_efron_fn,
                                                              task="survival"),
                      n_rounds=6, depth=2, learning_rate=0.3)
    np.testing.assert_allclose(jboost.predict(user, X), jboost.predict(m, X), atol=1e-4)
    with pytest.raises(ValueError, match="predict_proba needs a classification model"):
        jboost.predict_proba(m, X)
    # A sweep of the learning rate is one vmapped program; each member is its separate fit.
    rates = jnp.asarray([0.3, 0.1], jnp.float32)
    swept = jax.vmap(lambda lr: jboost.fit(X[:100], y[:100], objectives.cox("efron"), n_rounds=6,
                                           depth=2, learning_rate=lr))(rates)
    slow = jboost.fit(X[:100], y[:100], objectives.cox("efron"), n_rounds=6, depth=2,
                      learning_rate=0.1)
    for i, one in enumerate((m, slow)):
        np.testing.assert_allclose(np.asarray(swept.train_loss[i]), np.asarray(one.train_loss),
                                   rtol=1e-5)
        np.testing.assert_allclose(np.asarray(swept.trees.leaf_values[i]),
                                   np.asarray(one.trees.leaf_values), rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_ranking_fit_orders_a_query():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(240, 4)).astype(np.float32)
    rel = np.clip(np.round(X[:, 0] + 0.5 * rng.normal(size=240) + 1), 0, 3)
    y = np.stack([rel, np.repeat(np.arange(24), 10)], 1).astype(np.float32)
    m = jboost.fit(X[:160], y[:160], objectives.ranking("lambdarank"), n_rounds=6, depth=2,
                   learning_rate=0.5, eval_set=(X[160:], y[160:]))
    assert m.loss.max_group == 10 and m.train_loss[-1] < m.train_loss[0]
    held_out = objectives.ndcg(y[160:], jboost.predict(m, X[160:]))
    assert held_out > objectives.ndcg(y[160:], np.zeros(80)) + 0.1   # row order: no ranking


def test_errors_of_structured_labels():
    X, y = _survival(40, 2)
    cases = [
        (y[:, 0], "survival objective: y must be \\(n, 2\\) structured labels"),
        (np.stack([y[:, 0], 2 * y[:, 1]], 1), "events\\) must be 0 \\(censored\\) or 1"),
        (np.stack([y[:, 0] - 5, y[:, 1]], 1), "survival times\\) must be > 0"),
    ]
    for labels, match in cases:
        with pytest.raises(ValueError, match=match):
            jboost.fit(X, labels, objectives.cox(), n_rounds=2, depth=2)
    shuffled = np.stack([np.ones(40), np.tile([0, 1], 20)], 1)
    with pytest.raises(ValueError, match="query ids\\) must be contiguous.*np.argsort"):
        jboost.fit(X, shuffled, objectives.ranking(), n_rounds=2, depth=2)
    # Distinct ids that float32 labels would merge (2000000001 and 2000000002) are refused.
    big = np.stack([np.ones(40), np.repeat([5, 1e6, 2000000001, 2000000002], 10)], 1)
    with pytest.raises(ValueError, match=r"query ids\) must be integers below 2\*\*24"):
        jboost.fit(X, big, objectives.ranking(), n_rounds=2, depth=2)
    with pytest.raises(ValueError, match="needs all rows on one device"):
        jboost.fit(X, y, objectives.cox(), n_rounds=2, depth=2, devices="all")
    with pytest.raises(ValueError, match="eval_metric='mse' is a metric of per-row predictions"):
        jboost.fit(X, y, objectives.cox(), n_rounds=2, depth=2, eval_set=(X, y),
                   early_stopping_rounds=2, eval_metric="mse")
    with pytest.raises(ValueError, match="ties='exact' must be"):
        objectives.cox("exact")
    with pytest.raises(ValueError, match="hessian_diag='dense' must be one of"):
        jboost.Loss(objectives.cox_efron_fn, batch=True, hessian_diag="dense")
