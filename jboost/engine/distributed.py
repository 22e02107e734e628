"""Data spread over processes: ``rows="local"`` of ``jboost.fit``, sweeps, bagged boosters and
forests. Every process passes the same settings and its own rows; the fit is the single-process fit
of the processes' rows concatenated in process order. See docs/engine.md."""

from __future__ import annotations

import zlib
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jboost import devices as devices_lib
from jboost.data import binning, tabular

#: ``rows=`` of :func:`jboost.fit`: ``"global"`` (every process passes the whole table, the
#: default) or ``"local"`` (each process passes its own rows).
ROWS = ("global", "local")


def initialised() -> bool:
    """Whether ``jax.distributed.initialize()`` has run in this process."""
    try:
        from jax._src import distributed as _dist
        return _dist.global_state.client is not None
    except (ImportError, AttributeError):  # a JAX without it: more than one process tells
        return jax.process_count() > 1


def check_initialised() -> None:
    """``ValueError`` naming ``rows=`` unless ``jax.distributed`` is initialised."""
    if not initialised():
        raise ValueError(
            "rows='local' is the multi-process mode: call jax.distributed.initialize(...) in every "
            "process first (docs/guide/devices-and-hosts.md); for one process's "
            "rows on one machine, leave rows='global'.")


def allgather_rows(a: np.ndarray) -> np.ndarray:
    """The concatenation, in process order, of every process's ``a`` ``(n_p, ...)``, gathered as
    bytes (the row counts may differ, the dtype and trailing shape must agree)."""
    from jax.experimental import multihost_utils

    a = np.ascontiguousarray(a)
    n = a.shape[0]
    width = a.dtype.itemsize * int(np.prod(a.shape[1:]))  # bytes per row
    raw = a.reshape(n, -1).view(np.uint8) if a.size else np.zeros((n, width), np.uint8)
    counts = _gathered_ints(n)
    longest = int(counts.max())
    padded = np.zeros((longest, raw.shape[1]), np.uint8)
    padded[:n] = raw
    every = np.asarray(multihost_utils.process_allgather(padded))  # (P, longest, bytes)
    out = np.concatenate([every[p, : int(c)] for p, c in enumerate(counts)], axis=0)
    return np.ascontiguousarray(out).view(a.dtype).reshape((-1,) + a.shape[1:])


def any_process(flag: bool) -> bool:
    """Whether ``flag`` holds on any process (the same answer on every process)."""
    return bool(_gathered_ints(bool(flag)).any())


def _describe(v) -> str:
    """A process-independent description of a setting (no object addresses)."""
    if v is None or isinstance(v, (bool, int, float, str, np.generic)):
        return repr(v)
    if isinstance(v, jax.Array) and jnp.issubdtype(v.dtype, jax.dtypes.prng_key):
        v = jax.random.key_data(v)
    if isinstance(v, (np.ndarray, jax.Array)):
        a = np.asarray(v)
        return f"{a.dtype}{a.shape}:{zlib.crc32(np.ascontiguousarray(a).tobytes())}"
    if isinstance(v, dict):
        items = sorted(v.items(), key=lambda i: str(i[0]))
        return "{" + ",".join(f"{k}:{_describe(x)}" for k, x in items) + "}"
    if isinstance(v, (tuple, list)):
        return type(v).__name__ + "(" + ",".join(_describe(x) for x in v) + ")"
    name = getattr(v, "name", None)
    if isinstance(name, str):  # a jboost.Loss: its name and parameters
        return f"{type(v).__name__}:{name}:{_describe(getattr(v, 'params', None))}"
    target = v if callable(v) or isinstance(v, type) else type(v)
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', type(target).__name__)}"


def check_same_settings(settings: dict) -> None:
    """Raise ``ValueError`` naming the settings whose descriptions differ between processes."""
    from jax.experimental import multihost_utils

    names = sorted(settings)
    codes = np.array([zlib.crc32(_describe(settings[k]).encode()) & 0x7FFFFFFF for k in names], np.int32)
    every = np.asarray(multihost_utils.process_allgather(codes)).reshape(jax.process_count(), -1)
    differ = [k for i, k in enumerate(names) if np.any(every[:, i] != every[0, i])]
    if differ:
        raise ValueError(f"rows='local': {', '.join(differ)} differ between processes; every process "
                         "must call jboost.fit with the same settings (only X, y, sample_weight and "
                         "eval_set hold each process's own rows).")


def _mesh(devices) -> jax.sharding.Mesh:
    """The mesh of a multi-process fit: every device of every process (``None`` / ``"all"``), or
    the given ``Mesh`` / list, whose devices must come process by process."""

    mesh = devices_lib.mesh_of("all" if devices is None else devices)
    procs = [d.process_index for d in mesh.devices.flat]
    if len(mesh.axis_names) != 1 or any(b < a for a, b in zip(procs, procs[1:])) \
            or sorted(set(procs)) != list(range(jax.process_count())):
        raise ValueError(f"devices: rows='local' shards rows over a one-axis mesh holding devices of "
                         f"every process, process by process (got the processes {procs}); pass "
                         "devices=None or 'all'.")
    return mesh


class LocalRows(NamedTuple):
    """This process's place in a multi-process fit (:func:`gather`)."""

    mesh: jax.sharding.Mesh
    counts: np.ndarray   # (P,) rows of each process
    start: int           # table row of this process's first row
    n_local: int         # rows padded to on every process (a multiple of its devices)
    row_starts: tuple    # per mesh device: table row of its shard's first row
    y: Any               # labels of the whole table (concatenated, as given)
    sample_weight: Any   # weights of the whole table (None: none given)
    eval_set: Any        # the validation rows of every process, concatenated (None: none)

    @property
    def n_total(self) -> int:
        return int(self.counts.sum())

    @property
    def n_rows(self) -> int:
        """This process's rows."""
        return int(self.counts[jax.process_index()])

    def mine(self, a):
        """This process's rows of a whole-table array."""
        return None if a is None else a[self.start: self.start + self.n_rows]

    def borders(self, X, sample_weight, n_bins: int) -> np.ndarray:
        """The borders of the whole table (:func:`jboost.data.binning.merge_border_samples` of every
        process's :func:`jboost.data.binning.local_border_sample`), the same on every process."""
        X_part, w_part = binning.local_border_sample(X, sample_weight, self.start, self.n_total)
        parts = _split(allgather_rows(X_part), X_part.shape[0])
        weights = None if w_part is None else _split(allgather_rows(w_part), w_part.shape[0])
        return binning.merge_border_samples(parts, n_bins, weights)

    def shard(self, a, row_axis: int = 0, edge: bool = False):
        """This process's rows ``a`` as one global array of every process's rows, each padded to
        ``n_local`` (zeros; ``edge``: copies of its last row) and sharded over the mesh along
        ``row_axis``."""
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        axis = self.mesh.axis_names[0]
        a = np.asarray(a)
        spec = P(*([None] * row_axis + [axis]))
        pad = [(0, 0)] * a.ndim
        pad[row_axis] = (0, self.n_local - a.shape[row_axis])
        shape = list(a.shape)
        shape[row_axis] = self.n_local * jax.process_count()
        padded = np.pad(a, pad, mode="edge" if edge and a.shape[row_axis] else "constant")
        return jax.make_array_from_process_local_data(NamedSharding(self.mesh, spec), padded,
                                                      tuple(shape))

    def replicate(self, a):
        """``a`` (the same on every process) as a global array replicated over the mesh."""
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        return None if a is None else jax.make_array_from_process_local_data(
            NamedSharding(self.mesh, P()), np.asarray(a))

    @property
    def table_positions(self) -> np.ndarray:
        """``(n_total,)`` int32: the position of every table row (in order) in a global array of
        :meth:`shard` (each process's rows, then its padding)."""
        return np.concatenate([q * self.n_local + np.arange(int(c)) for q, c in
                               enumerate(self.counts)]).astype(np.int32)

    def global_data(self, data):
        """``data`` (this process's rows, :class:`jboost.engine.state.Data`) as global arrays: the
        training rows padded with zero-weight rows to ``n_local`` and sharded over the mesh,
        the validation rows (already every process's) replicated."""
        if data.margin is not None or data.margin_valid is not None:
            raise ValueError("base_margin is not supported with rows='local'.")
        return data._replace(X_binned=self.shard(data.X_binned, 1), y=self.shard(data.y, edge=True),
                             w=self.shard(data.w), X_valid=self.replicate(data.X_valid),
                             y_valid=self.replicate(data.y_valid), w_valid=self.replicate(data.w_valid))

    def place_carry(self, carry):
        """A :class:`jboost.engine.calls.RoundsCarry` of host arrays as global arrays sharded as the
        program's output is, so that the first call compiles the program the later calls use."""
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        def put(spec):
            sharding = NamedSharding(self.mesh, spec)
            return lambda a: jax.make_array_from_callback(np.shape(a), sharding,
                                                          lambda i: np.asarray(a)[i])

        state = carry.state
        out = jax.tree_util.tree_map(put(P()), carry._replace(state=state._replace(base=None, pending=None)))
        rows = put(P(self.mesh.axis_names[0]))
        return out._replace(state=out.state._replace(base=rows(state.base), pending=rows(state.pending)))

    def everywhere(self, check, others: type = RuntimeError):
        """``check`` run on every process, raising on every process when it raises on any (the
        others raise ``others``), so that none is left waiting in a collective."""
        def run(*args, **kwargs):
            error = None
            try:
                check(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - re-raised below, on every process
                error = e
            failed = _allgather_flags(error is not None)
            if error is not None:
                raise error
            if failed.any():
                raise others(f"rows='local': {getattr(check, '__name__', 'a check')} failed on "
                                   f"process(es) {np.flatnonzero(failed).tolist()} (see their error).")
        return run

    def run_everywhere(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)``, raising on every process when it raises on any
        (:meth:`everywhere`)."""
        out = []

        def run():
            out.append(fn(*args, **kwargs))

        run.__name__ = getattr(fn, "__name__", "a check")
        self.everywhere(run, ValueError)()
        return out[0]

    def any(self, flag: bool) -> bool:
        return any_process(flag)

    @property
    def is_first(self) -> bool:
        return jax.process_index() == 0

    def localize(self, tree):
        """Process-local copies of a tree of global arrays: a replicated array's local copy, a
        sharded one's rows held here (a host array)."""
        def one(a):
            if not isinstance(a, jax.Array) or a.is_fully_addressable:
                return a
            if a.sharding.is_fully_replicated:
                return a.addressable_data(0)
            shards = sorted(a.addressable_shards, key=lambda s: s.index[0].start or 0)
            return np.concatenate([np.asarray(s.data) for s in shards], axis=0)
        return jax.tree_util.tree_map(one, tree)


def _split(rows: np.ndarray, mine: int):
    """Every process's part of a gathered concatenation (counts gathered again: cheap)."""
    counts = _gathered_ints(mine)
    return np.split(rows, np.cumsum(counts)[:-1])


def gather(X, y, sample_weight, eval_set, devices, settings: dict) -> LocalRows:
    """Check a multi-process fit (runtime, mesh, rows, the same ``settings`` and shapes everywhere)
    and gather row counts, labels, weights and validation rows; a process that refuses its rows
    makes every process raise."""

    check_initialised()
    mesh = _mesh(devices)
    error, shapes = None, {}
    try:
        X = tabular.as_matrix(X, "X")
        y = np.asarray(y)
        if y.dtype.kind not in "biuf":
            raise ValueError(f"y: rows='local' takes numeric (or bool) labels, got dtype {y.dtype}; "
                             "map class labels to numbers with the same mapping on every process.")
        tabular.check_length(y, X.shape[0])
        w = None if sample_weight is None else tabular.as_weights(sample_weight, X.shape[0])
        if eval_set is not None:
            if not isinstance(eval_set, (tuple, list)) or len(eval_set) not in (2, 3):
                raise TypeError("eval_set must be a tuple (X_valid, y_valid) or (X_valid, y_valid, "
                                "w_valid).")
            eval_set = (tabular.as_matrix(eval_set[0], "eval_set X", allow_empty=True),) + tuple(
                np.asarray(e) for e in eval_set[1:])
        shapes = dict(n_features=X.shape[1], y_shape=y.shape[1:], y_dtype=str(y.dtype),
                      sample_weight_given=w is not None,
                      eval_set_form=None if eval_set is None else
                      (len(eval_set),) + tuple((e.shape[1:], str(e.dtype)) for e in eval_set))
    except (ValueError, TypeError) as e:
        error = e
    failed = np.asarray(_allgather_flags(error is not None))
    if failed.any():
        if error is not None:
            raise error
        raise ValueError(f"rows='local': process(es) {np.flatnonzero(failed).tolist()} refused their "
                         "rows (see their error).")
    check_same_settings(dict(settings, **shapes))
    counts = np.asarray(allgather_rows(np.array([X.shape[0]], np.int64))).reshape(-1)
    p = jax.process_index()
    start = int(counts[:p].sum())
    per_process = {q: [d for d in mesh.devices.flat if d.process_index == q]
                   for q in range(jax.process_count())}
    n_dev = max(len(v) for v in per_process.values())
    if any(len(v) != n_dev for v in per_process.values()):
        raise ValueError("devices: rows='local' needs the same number of devices on every process.")
    n_local = -(-max(int(counts.max()), 1) // n_dev) * n_dev
    starts = []
    for q in range(jax.process_count()):  # shard i of process q starts at its table row
        starts += [int(counts[:q].sum()) + i * (n_local // n_dev) for i in range(n_dev)]
    y_all = allgather_rows(y)
    w_all = None if w is None else allgather_rows(w)
    ev = None if eval_set is None else tuple(allgather_rows(e) for e in eval_set)
    return LocalRows(mesh, counts, start, n_local, tuple(starts), y_all, w_all, ev)


def _allgather_flags(flag: bool) -> np.ndarray:
    """``(P,)`` every process's ``flag``."""
    return _gathered_ints(bool(flag)) != 0


def _gathered_ints(value: int) -> np.ndarray:
    """``(P,)`` int32: every process's ``value``."""
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(np.array([value], np.int32))).reshape(-1)
