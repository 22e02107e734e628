"""Bagged boosters of rows spread over processes (rows='local'): the gathered fit and its shard_map chunk program."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jboost import _compile, checks
from jboost.bagging import boosters_binned, bootstrap as bootstrap_lib
from jboost.data import labels, tabular as tabular_lib
from jboost.engine import boosting as boosting_lib, distributed, memory, state as state_lib
from jboost.fitting import prepare, rounds as rounds_lib, settings as settings_lib
from jboost.losses import baselines, checks as checks_lib
from jboost.models import bagged, metadata
from jboost.trees import family


def fit_local(X, y, loss, sample_weight, eval_set, settings: dict) -> bagged.BaggedBoosters:
    """:func:`jboost.bagging.fit_bagged_boosters` of rows spread over processes (``rows="local"``):
    the bags of the processes' rows concatenated in process order, on every process. See
    docs/ensembles.md."""
    s = settings
    oob_asked = isinstance(eval_set, str)
    names = tabular_lib.feature_names_of(X)
    local = distributed.gather(X, y, sample_weight, None if oob_asked else eval_set, None,
                               dict(s, eval_set="oob" if oob_asked else eval_set is None, names=names))
    _refuse_unsupported(s, loss, eval_set, oob_asked)
    bootstrap, n_bags, chunk_size, config, hyper = boosters_binned.bag_settings(s)
    config = config._replace(**settings_lib.constraint_settings(
        s["monotone_constraints"], s["interaction_constraints"], config, n_features=X.shape[1],
        names=names))
    if not rounds_lib.host_fit(hyper, s["key"]):
        raise ValueError("rows='local' needs a concrete fit (not under jax.vmap or jax.jit).")
    n = local.n_total
    y_all, classes, eval_set = prepare.mapped_labels(local.y, local.eval_set, loss,
                                                         s["n_outputs"], None, None, n_rows=n)
    y_all = labels.as_labels(y_all, n)
    loss_obj = checks_lib.resolve_loss(loss, y_all, s["n_outputs"])
    stopping, _ = boosters_binned.bag_early_stopping(s["early_stopping_rounds"], s["early_stopping_tolerance"],
                                  s["eval_metric"], eval_set, loss_obj, bootstrap)
    checks_lib.check_labels(loss_obj, y_all, "y")  # every process raises alike
    w_all = tabular_lib.as_weights(local.sample_weight, n)
    X = tabular_lib.as_matrix(X, "X")
    borders = local.borders(X, None, config.n_bins)  # unweighted, as the single-process fit's
    data = prepare.prepare(X, local.mine(y_all), sample_weight=local.mine(w_all),
                               n_bins=config.n_bins, weighted_borders=False, eval_set=eval_set,
                               borders=borders,
                               label_check=lambda v, name: checks_lib.check_labels(loss_obj, v, name))
    local.everywhere(memory.check_boosting_memory, MemoryError)(
        local.n_local // (len(local.mesh.devices.flat) // jax.process_count()), X.shape[1], config,
        loss_obj, k_from_labels=loss_obj.task == "multiclass" and s["n_outputs"] is None,
        n_models=n_bags, n_together=chunk_size, what="bagged boosters",
        fix="use a smaller chunk_size, depth, n_bins or n_outputs")
    key = checks.as_key(s["key"])
    counts = np.asarray(bootstrap_lib.all_bootstrap_weights(key, n_bags, n, bootstrap))
    config = config._replace(early_stopping=stopping, row_starts=local.row_starts)
    valid = None if eval_set is None else tuple(
        local.replicate(a) for a in (data.X_valid, data.y_valid, data.w_valid))
    mine = slice(local.start, local.start + local.n_rows)
    args = (local.shard(data.X_binned, 1), local.shard(data.y, edge=True), local.shard(data.w),
            local.shard(counts[:, mine], 1), key, hyper, loss_obj, valid,
            local.replicate(y_all), local.replicate(w_all), local.replicate(counts))
    program = _local_bags_program(local.mesh, config, n_bags)
    outs = []
    for c in range(-(-n_bags // chunk_size)):
        bags = np.arange(c * chunk_size, (c + 1) * chunk_size, dtype=np.int32)
        outs.append(local.localize(program(*args, bags)))
        if s["verbose"] and local.is_first:
            print(f"bagged boosters: bags {min((c + 1) * chunk_size, n_bags)}/{n_bags}", flush=True)
    out, init = jax.tree_util.tree_map(lambda *a: np.concatenate(a)[:n_bags], *outs)
    trees, train_loss, valid_loss = boosters_binned.kept_rounds(
        out, loss_obj, state_lib.Data.train_only(data.X_binned, data.y, data.w), init, stopping)
    trees = family.with_borders(jax.tree_util.tree_map(jnp.asarray, trees), data.borders)
    return bagged.BaggedBoosters(
        trees=trees, borders=data.borders, baseline=jnp.asarray(init),
        loss=jax.tree_util.tree_map(jnp.asarray, out.final_loss), bag_weights=jnp.asarray(counts),
        train_loss=jnp.asarray(train_loss),
        valid_loss=None if eval_set is None else jnp.asarray(valid_loss),
        best_round=None if out.best_round is None else jnp.asarray(out.best_round),
        classes=None if classes is None else metadata.Classes(classes),
        feature_names=metadata.named(names), categorical=None)


def _refuse_unsupported(s: dict, loss, eval_set, oob_asked: bool) -> None:
    """The settings a multi-process fit does not support yet, refused (after the processes'
    settings were compared: every process raises alike)."""
    refused = [k for k in ("init_model", "checkpoint_dir", "base_margin", "eval_base_margin") if s[k]]
    if s["n_callbacks"]:
        refused.append("callbacks")
    settings_lib.refuse_local_rows("bagged boosters with rows='local' do", refused,
                                   s["cat_features"], loss)
    if oob_asked or (eval_set is None and s["early_stopping_rounds"] is not None):
        raise ValueError("eval_set: bagged boosters with rows='local' score no out-of-bag rows yet "
                         "(eval_set='oob', or early stopping without an eval_set): pass "
                         "eval_set=(X_valid, y_valid[, w_valid]) with each process's validation rows.")


@functools.lru_cache(maxsize=16)
def _local_bags_program(mesh, config: boosting_lib.BoostConfig, n_bags: int):
    """The compiled chunk of bags of :func:`fit_local`: this process's rows and bootstrap weights
    sharded over the one-axis ``mesh``, histograms ``psum``-ed; the whole table's labels, weights
    and bootstrap weights (for the baselines) and the validation rows replicated."""
    from jax.sharding import PartitionSpec as P

    axis = mesh.axis_names[0]
    config = config._replace(axis_name=axis)

    def body(X_binned, y, w, counts, key, hyper, loss, valid, y_all, w_all, counts_all, bags):
        def one(b):
            i = jnp.minimum(b, n_bags - 1)  # the padding of the last chunk repeats the last bag
            _, k_fit = bootstrap_lib.bag_keys(key, b)
            init = baselines.baseline(loss, y_all, w_all * counts_all[i])
            if valid is None:
                data = state_lib.Data.train_only(X_binned, y, w * counts[i])
            else:
                data = state_lib.Data(X_binned, y, w * counts[i], *valid)
            out = boosting_lib.boost.__wrapped__(data, k_fit, hyper, loss, init, config=config)
            return out._replace(state=None), init
        return jax.vmap(one)(bags)

    row, rep = P(axis), P()
    fn = jax.shard_map(body, mesh=mesh, in_specs=(P(None, axis), row, row, P(None, axis))
                       + (rep,) * 8, out_specs=rep, check_vma=False)
    return _compile.jit(fn)
