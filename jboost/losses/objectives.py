"""Objectives that are not sums over rows: Cox's partial likelihood, listwise ranking, and any
loss written as one function of the whole batch (a :class:`jboost.Loss` with ``batch=True``).

Cox (1972), Breslow (1974), Efron (1977); ListNet (Cao et al. 2007); LambdaRank (Burges 2010);
NDCG gains (Järvelin and Kekäläinen 2002). See ``docs/objectives.md``.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp

from jboost.losses import loss


def runs(v):
    """Runs of equal consecutive values of ``v (n,)`` (query groups, blocks of tied times):
    ``(run, position)``, each ``(n,)`` int32, each entry's run (0, 1, ...) and its place in it.
    """
    n = v.shape[0]
    new = jnp.concatenate([jnp.ones((1,), bool), v[1:] != v[:-1]])
    idx = jnp.arange(n, dtype=jnp.int32)
    return jnp.cumsum(new.astype(jnp.int32)) - 1, idx - jax.lax.cummax(jnp.where(new, idx, 0))


def zero_baseline(y, w, n_outputs, **params):
    """``(K,)`` float32 zeros: the baseline of an objective invariant to a constant shift of the raw
    scores (Cox, losses within query groups).
    """
    return jnp.zeros((n_outputs,), jnp.float32)


# ---- Cox proportional hazards --------------------------------------------------------------


def _cox_terms(f, y, w, efron: bool):
    """The partial likelihood's parts ``(linear, lse, q)``, rows sorted by time: ``-log PL = lse -
    linear`` and ``grad(lse - q)`` is the hessian's exact diagonal (``docs/objectives.md``).
    """
    t, d = y[:, 0], y[:, 1]
    n = t.shape[0]
    if n == 0:  # no rows (an absent validation set): an empty sum
        zero = jnp.sum(f)
        return zero, zero, zero
    order = jnp.argsort(t)
    ts, ds, ws, fs = t[order], d[order], w[order], f[order]
    live = ws > 0
    shift = jax.lax.stop_gradient(jnp.max(jnp.where(live, fs, -jnp.inf), initial=-jnp.inf))
    shift = jnp.where(jnp.isfinite(shift), shift, 0.0)
    e = jnp.where(live, ws * jnp.exp(fs - shift), 0.0)          # w_k exp(f_k - shift)
    e2 = e * e
    first = jnp.searchsorted(ts, ts, side="left")               # the first row of each tie block
    risk = jnp.cumsum(e[::-1])[::-1][first]                      # sum over the rows at risk
    risk2 = jnp.cumsum(e2[::-1])[::-1][first]
    event = ds * ws                                              # weighted event indicator
    if efron:
        block, _ = runs(ts)                           # tie blocks of the times
        seg = lambda v: jax.ops.segment_sum(v, block, num_segments=n)[block]
        m = seg(ds)                                              # events tied at the row's time
        cs = jnp.cumsum(ds)
        before = (cs - ds)[first]                                # events before the tie block
        ratio = jnp.where(m > 0, (cs - ds - before) / jnp.maximum(m, 1.0), 0.0)  # l / m
        denom = risk - ratio * seg(ds * e)
        denom2 = risk2 - (2.0 * ratio - ratio * ratio) * seg(ds * e2)
        a = ds * seg(event) / jnp.maximum(m, 1.0)                # mean weight of the tied events
    else:
        denom, denom2, a = risk, risk2, event
    has = a > 0
    safe = jnp.where(has, denom, 1.0)
    lse = jnp.sum(jnp.where(has, a * (jnp.log(safe) + shift), 0.0))
    q = jnp.sum(jnp.where(has, a * denom2 / (2.0 * jax.lax.stop_gradient(safe) ** 2), 0.0))
    linear = jnp.sum(event * fs)
    return linear, lse, q


def _cox_diag(y, f, w, efron: bool):
    return jax.grad(lambda g: (lambda _, lse, q: lse - q)(*_cox_terms(g, y, w, efron=efron)))(f)


def cox_breslow_fn(y, f, w):
    """Cox's weighted negative log partial likelihood, ties as Breslow (1974): ``sum_i w_i d_i (log
    sum_{t_k >= t_i} w_k exp(f_k) - f_i)`` of labels ``y (n, 2) = (time, event)``, raw scores ``f
    (n,)`` (log relative risks) and weights ``w (n,)``.
    """
    linear, lse, _ = _cox_terms(f, y, w, efron=False)
    return lse - linear


def cox_efron_fn(y, f, w):
    """:func:`cox_breslow_fn` with ties as Efron (1977) (equal without tied events)."""
    linear, lse, _ = _cox_terms(f, y, w, efron=True)
    return lse - linear


def cox_breslow_diag(y, f, w):
    """The exact hessian diagonal ``(n,)`` of :func:`cox_breslow_fn`."""
    return _cox_diag(y, f, w, efron=False)


def cox_efron_diag(y, f, w):
    """The exact hessian diagonal ``(n,)`` of :func:`cox_efron_fn`."""
    return _cox_diag(y, f, w, efron=True)


def cox(ties: str = "efron") -> loss.Loss:
    """Cox proportional hazards (Cox 1972): boosting the log relative risk by the negative log
    partial likelihood, labels ``y = (time, event)`` ``(n, 2)``; its Newton curvature is the
    hessian's exact diagonal (``docs/objectives.md``).

    Args:
      ties: ``"efron"`` (the default, as R's ``coxph``) or ``"breslow"``.

    Returns:
      A batch :class:`jboost.Loss` of task ``"survival"``.

    Raises:
      ValueError: ``ties`` is neither.
    """
    if ties not in ("breslow", "efron"):
        raise ValueError(f"ties={ties!r} must be 'breslow' or 'efron'.")
    efron = ties == "efron"
    return loss.Loss(cox_efron_fn if efron else cox_breslow_fn, name=f"cox_{ties}",
                           task="survival", baseline=zero_baseline, hessian="autodiff",
                           batch=True, hessian_diag=cox_efron_diag if efron else cox_breslow_diag)


# ---- Listwise ranking within query groups --------------------------------------------------


def gains(rel):
    """The gain ``2^rel - 1`` of relevance grades ``rel >= 0`` (Järvelin and Kekäläinen 2002)."""
    return jnp.exp2(rel) - 1.0


def softmax_cross_entropy_fn(y, f, w):
    """Listwise softmax cross entropy (ListNet, Cao et al. 2007), summed over the queries: per
    query ``-sum_i t_i log softmax(f)_i``, targets ``t_i`` proportional to the gains ``w_i (2^rel_i -
    1)``, the softmax over the query's rows weighted as copies; a query without a relevant row adds
    nothing. ``y (n, 2) = (relevance, query id)``, ``f (n,)``, ``w (n,)``.
    """
    n = f.shape[0]
    if n == 0:  # no rows: an empty sum
        return jnp.sum(f)
    block, _ = runs(y[:, 1])
    seg = lambda v: jax.ops.segment_sum(v, block, num_segments=n)
    live = w > 0
    top = jax.lax.stop_gradient(jax.ops.segment_max(jnp.where(live, f, -jnp.inf), block,
                                                    num_segments=n))
    top = jnp.where(jnp.isfinite(top), top, 0.0)[block]
    z = seg(jnp.where(live, w * jnp.exp(f - top), 0.0))[block]
    gain = w * gains(y[:, 0])
    total = seg(gain)[block]
    target = jnp.where(total > 0, gain / jnp.where(total > 0, total, 1.0), 0.0)
    logp = f - top - jnp.log(jnp.where(z > 0, z, 1.0))
    return -jnp.sum(jnp.where(target > 0, target * logp, 0.0))


def _pairs(y, f, w, max_group: int):
    """Every row's partners in its query group, ``(n, G)`` (``G = max_group``, static): their
    index and validity.
    """
    n = f.shape[0]
    _, pos = runs(y[:, 1])
    start = jnp.arange(n, dtype=jnp.int32) - pos
    size = jax.ops.segment_sum(jnp.ones((n,), jnp.int32), start, num_segments=n)[start]
    j = jnp.arange(max_group, dtype=jnp.int32)
    idx = jnp.minimum(start[:, None] + j[None, :], n - 1)
    valid = (j[None, :] < size[:, None]) & (w[idx] > 0) & (w[:, None] > 0)
    return idx, valid


def lambdarank_fn(y, f, w, sigma=1.0, max_group: int = 1):
    """A LambdaRank-style NDCG surrogate (Burges 2010), summed over the queries: over the pairs
    with ``rel_i > rel_j``, ``|dNDCG_ij| log(1 + exp(-sigma (f_i - f_j)))`` weighted ``w_i w_j``,
    ``|dNDCG_ij|`` (held constant) the NDCG change if ``i`` and ``j`` swapped their current ranks.
    ``y (n, 2) = (relevance, query id)``, ``f (n,)``, ``w (n,)``; ``max_group`` is static.
    """
    rel = y[:, 0]
    n = f.shape[0]
    if n == 0:  # no rows: an empty sum
        return jnp.sum(f)
    idx, valid = _pairs(y, f, w, max_group)
    i = jnp.arange(n)[:, None]
    fs = jax.lax.stop_gradient(f)
    gain = gains(rel)
    before = lambda s: valid & ((s[idx] > s[:, None]) | ((s[idx] == s[:, None]) & (idx < i)))
    rank = 1.0 + jnp.sum(before(fs), axis=1, dtype=jnp.float32)   # current rank in the query
    ideal = 1.0 + jnp.sum(before(rel), axis=1, dtype=jnp.float32)  # rank in the ideal order
    disc, ideal_disc = 1.0 / jnp.log2(1.0 + rank), 1.0 / jnp.log2(1.0 + ideal)
    idcg = jnp.sum(jnp.where(valid, (gain * ideal_disc)[idx], 0.0), axis=1)
    delta = (jnp.abs(gain[:, None] - gain[idx]) * jnp.abs(disc[:, None] - disc[idx])
             / jnp.where(idcg > 0, idcg, 1.0)[:, None])
    pair = valid & (rel[:, None] > rel[idx])
    terms = jax.lax.stop_gradient(delta) * jax.nn.softplus(-sigma * (f[:, None] - f[idx]))
    return jnp.sum(jnp.where(pair, (w[:, None] * w[idx]) * terms, 0.0))


def ranking(kind: str = "softmax", sigma: float = 1.0) -> loss.Loss:
    """Listwise ranking within query groups, ``y = (relevance, query id)`` ``(n, 2)``, query ids
    contiguous; the hessian's exact diagonal by ``hessian_diag="groups"``.

    Args:
      kind: ``"softmax"`` (ListNet, Cao et al. 2007) or ``"lambdarank"`` (Burges 2010).
      sigma: the logistic scale of ``"lambdarank"`` (traced, ``> 0``).

    Returns:
      A batch :class:`jboost.Loss` of task ``"ranking"``.

    Raises:
      ValueError: ``kind`` is neither.
    """
    if kind == "softmax":
        return loss.Loss(softmax_cross_entropy_fn, name="ranking_softmax", task="ranking",
                               baseline=zero_baseline, hessian="autodiff", batch=True,
                               hessian_diag="groups")
    if kind == "lambdarank":
        return loss.Loss(lambdarank_fn, params={"sigma": sigma}, name="ranking_lambdarank",
                               task="ranking", baseline=zero_baseline, hessian="autodiff",
                               batch=True, hessian_diag="groups",
                               domains={"sigma": loss.POSITIVE})
    raise ValueError(f"kind={kind!r} must be 'softmax' or 'lambdarank'.")


# ---- A loss the user writes ----------------------------------------------------------------


def batch_loss(fn: Callable, *, params: Optional[dict] = None, name: Optional[str] = None,
               task: str = "regression", n_outputs: int = 1, hessian_diag: Any = None,
               n_probes: int = 32, baseline: Optional[Callable] = None) -> loss.Loss:
    """A loss the user writes as one function of the batch; jboost differentiates it
    (``docs/objectives.md``).

    Args:
      fn: ``fn(y, raw, w, **params) -> scalar``, the weighted SUM over the rows.
      params: its continuous parameters (traced, vmappable).
      name: the loss's name; ``None``: ``fn.__name__``.
      task: the task (:data:`jboost.losses.loss.TASKS`).
      n_outputs: ``K``.
      hessian_diag: ``None`` (``"groups"`` for ``task="ranking"``, else ``"exact"``),
        ``"exact"``, ``"groups"``, ``"hutchinson"`` or a function ``diag(y, raw, w, **params)``.
      n_probes: the probes of ``"hutchinson"``.
      baseline: ``baseline(y, w, n_outputs, **params) -> (K,)``; ``None``: the optimal constant
        found numerically (L-BFGS).

    Returns:
      A batch :class:`jboost.Loss`.

    Raises:
      ValueError: ``hessian_diag`` is not one of its values, or ``n_outputs`` is below 1.
    """
    if hessian_diag is None:
        hessian_diag = "groups" if task == "ranking" else "exact"
    return loss.Loss(fn, params=params or {}, name=name or getattr(fn, "__name__", "custom"),
                           task=task, n_outputs=n_outputs, baseline=baseline, hessian="autodiff",
                           batch=True, hessian_diag=hessian_diag, n_probes=int(n_probes))
