"""Forests whose rows are sharded over a mesh or spread over processes: the sharded rows, their shard_map chunk program, the multi-process gather."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jboost import _compile
from jboost.bagging import forest_binned
from jboost.engine import distributed
from jboost.fitting import settings as settings_lib


class ShardedRows(NamedTuple):
    """A forest's training rows sharded over the first axis of ``mesh``: ``arrays`` are the
    global ``(X_binned (F, N), y (N,), w (N,))``, device ``i``'s part starting at table row
    ``row_starts[i]`` (padding rows: weight 0), the table holding ``n_total`` rows; ``local``:
    the :class:`jboost.engine.distributed.LocalRows` of a multi-process fit (else ``None``)."""

    mesh: Any
    arrays: Tuple[Any, Any, Any]
    n_total: int
    row_starts: Tuple[int, ...]
    local: Any = None

    @classmethod
    def create(cls, mesh, arrays, n_total: int, local=None) -> "ShardedRows":
        X_binned, y, w = (np.asarray(a) for a in arrays)
        if local is not None:  # each process's rows, padded to the same count
            return cls(mesh, (local.shard(X_binned, 1), local.shard(y, edge=True), local.shard(w)),
                       n_total, tuple(local.row_starts), local)
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        axis = mesh.axis_names[0]
        d = mesh.shape[axis]
        n = X_binned.shape[1]
        extra = -(-n // d) * d - n   # zero-weight rows up to a multiple of the devices
        put = lambda a, spec: jax.device_put(a, NamedSharding(mesh, spec))  # noqa: E731
        arrays = (put(np.pad(X_binned, ((0, 0), (0, extra))), P(None, axis)),
                  put(np.pad(y, (0, extra), mode="edge"), P(axis)), put(np.pad(w, (0, extra)), P(axis)))
        return cls(mesh, arrays, n_total, tuple(i * ((n + extra) // d) for i in range(d)))


@functools.lru_cache(maxsize=16)
def sharded_program(mesh, config: forest_binned.ForestConfig, n_total: int, row_starts: Tuple[int, ...]):
    """The compiled chunk of bags of a forest whose rows are sharded over the first axis of
    ``mesh``: ``program(X_binned, y, w, key, hyper, bags)`` with the rows of :class:`ShardedRows`,
    returning the bags' ``(trees, counts (C, n_total))`` replicated
    (:func:`jboost.bagging.forest_binned.forest_bag_fn`)."""
    from jax.sharding import PartitionSpec as P

    axis = mesh.axis_names[0]

    def body(X_binned, y, w, key, hyper, bags):
        start = jnp.asarray(row_starts, jnp.int32)[lax.axis_index(axis)]
        rows = jnp.minimum(start + jnp.arange(X_binned.shape[1], dtype=jnp.int32), n_total - 1)
        return jax.vmap(forest_binned.forest_bag_fn(X_binned, y, w, key, hyper, config, axis_name=axis,
                                 n_total=n_total, rows=rows))(bags)

    rep = P()
    fn = jax.shard_map(body, mesh=mesh, in_specs=(P(None, axis), P(axis), P(axis), rep, rep, rep),
                       out_specs=rep, check_vma=False)
    return _compile.jit(fn)


def sharded_chunk_from(X_binned, y, w, key, hyper, borders, bags, *, first: int, sharded, program):
    """:func:`jboost.bagging.forest_binned.forest_chunk_from` of rows sharded over a mesh
    (``program``: :func:`sharded_program`); a multi-process fit's outputs as process-local copies
    (the same on every process)."""
    if sharded.local is None:  # (also traced: the shapes of checkpoints, jax.eval_shape)
        return program(X_binned, y, w, key, hyper, jnp.asarray(bags, jnp.int32) + jnp.int32(first))
    # several processes: host indices (the same on every process), process-local outputs
    return sharded.local.localize(program(X_binned, y, w, key, hyper,
                                          np.asarray(bags, np.int32) + np.int32(first)))


def local_rows(X, y, sample_weight, devices, settings: dict, **refused) -> "distributed.LocalRows":
    """The checks and gathers of a multi-process forest (``rows="local"``): the same ``settings``
    on every process, then the refused arguments (given on any process: every process raises)."""
    local = distributed.gather(X, y, sample_weight, None, devices, dict(settings, **refused))
    settings_lib.refuse_local_rows("fit_forest with rows='local' does",
                                   [k for k, v in refused.items() if v])
    return local
