"""Fitting many models together: chunks of ``vmap``-ed models, and the memory estimates that
size the chunks (sweeps, forests, bagged boosters, ECOC bits).

* :func:`map_in_chunks`: the chunks as one program (``lax.map`` over chunks, each a ``vmap``),
  with an optional progress line per chunk from inside the program.
* :func:`map_chunks`: the chunks as host-side calls of one compiled chunk program, so that each
  chunk's outputs can be saved as it finishes and a rerun skip the chunks it already has
  (``done=``, ``on_chunk=``); :class:`ChunkCheckpoints` is that store (one ``.npz`` per chunk,
  written atomically, guarded by a :func:`fingerprint` of the call). Sweeps and forests
  (``checkpoint_dir=``) resume through them to the bitwise result of an uninterrupted call.
  ``map_chunks(callbacks=)`` calls the caller's functions after each chunk (one may stop);
  ``map_chunks(at_once=True)`` waits for a chunk by polling, so ``Ctrl-C`` lands within
  milliseconds, and ``keep_on_interrupt=True`` then returns the chunks finished so far (with a
  warning) instead of raising: the concrete fits of forests and bagged boosters.
* :func:`map_checkpointed`: both together for a jitted chunk function over item indices -- the
  checkpoints and callbacks of forests, bagged boosters, ECOC ensembles and stacking.
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
import warnings
import zipfile

from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jboost import _native
from jboost import histograms

# Default memory budget of one chunk of models, per device (bytes).
DEFAULT_CPU_BUDGET = 1 << 30
# On CPU the kernels of a chunk's models run side by side (whole models spread over the kernel's
# threads, and the first level of a tree built for up to 8 models in one pass over the bins), so
# batching pays, up to a point: measured on 2 cores (2 host devices, spam, 80 models, 100 rounds,
# depth 6), 88-99 ms per model with 8 models per device, 105-115 with 4 (129-133 with 16, whose
# last chunk was half padding); on 100k x 50, 0.89-0.91 s per model with 4 or 8. Accelerators
# take as many models as the memory budget allows.
DEFAULT_CPU_MODELS_PER_DEVICE = 8
# A sweep's chunk on CPU holds between DEFAULT_CPU_MODELS_PER_CHUNK and MAX_CPU_MODELS_PER_CHUNK
# models over all the CPU's devices: as many as keep its models' (row, feature) cells within
# CPU_CHUNK_CELLS, rounded down to a power of two. Small data gains most from wide chunks (the
# per-round work outside the kernels, and the kernels' start and balance, are shared by more
# models); on large data a model's own work dominates and narrower chunks report progress and
# keep checkpoints more often. Measured on spam (3065 x 57, one device, 64 models, 100 rounds,
# depth 6, three alternated warm runs): 16 models per chunk 9.6-10.2 s wall, 32: 7.9-9.2 s, 64:
# 6.9-8.3 s (CPU 17.1-17.9, 14.5-16.9 and 12.6-15.3 s).
DEFAULT_CPU_MODELS_PER_CHUNK = 16
MAX_CPU_MODELS_PER_CHUNK = 64
CPU_CHUNK_CELLS = 1 << 24


def cpu_models_per_device(n_devices: int, n_rows: Optional[int] = None,
                          n_features: Optional[int] = None) -> int:
    """A sweep's models per CPU device and chunk: the models of a chunk (see
    :data:`CPU_CHUNK_CELLS`; :data:`DEFAULT_CPU_MODELS_PER_CHUNK` when the data's shape is not
    given) shared by ``n_devices`` devices."""
    models = DEFAULT_CPU_MODELS_PER_CHUNK
    cells = None if n_rows is None or n_features is None else max(int(n_rows) * int(n_features), 1)
    while cells is not None and models < MAX_CPU_MODELS_PER_CHUNK and 2 * models * cells <= CPU_CHUNK_CELLS:
        models *= 2
    return max(1, models // max(int(n_devices), 1))


def map_in_chunks(fn, n_items: int, chunk_size: int, progress: Optional[str] = None):
    """``fn`` over ``arange(n_items)``: ``lax.map`` over chunks, each chunk one ``vmap``.

    The items are padded up to a whole number of equal chunks (the extra items are computed
    and dropped; fewer than the number of chunks), so only one chunk shape is compiled.
    ``progress``: a name (e.g. ``"forest: trees"``); then a line with the items done, the elapsed
    and the estimated remaining time is printed on the host as each chunk finishes
    (``jax.debug.callback``, ordered; not under an outer ``jax.vmap``).
    """
    n_chunks, size = chunk_layout(n_items, chunk_size)
    idx = jnp.arange(n_chunks * size).reshape(n_chunks, size)
    body = jax.vmap(fn)
    if progress is not None:
        report = _ProgressLine(progress, n_items, n_chunks, size)
        inner = body

        def body(chunk):
            jax.debug.callback(report.start, chunk[0], ordered=True)
            out = inner(chunk)
            done = sum(jnp.sum(leaf.reshape(-1)[:1].astype(jnp.float32))
                       for leaf in jax.tree_util.tree_leaves(out))  # after the chunk's work
            jax.debug.callback(report.done, chunk[0], done, ordered=True)
            return out

    out = lax.map(body, idx)
    # The explicit size (not -1): an output with a zero-sized axis (an empty validation curve)
    # has no -1 to infer.
    return jax.tree_util.tree_map(
        lambda a: a.reshape((a.shape[0] * a.shape[1],) + a.shape[2:])[:n_items], out)


class _ProgressLine:
    """The host side of :func:`map_in_chunks`'s progress lines (real time between chunks)."""

    def __init__(self, name: str, n_items: int, n_chunks: int, size: int):
        self.name, self.n_items, self.n_chunks, self.size = name, n_items, n_chunks, size
        self.t0 = None

    def start(self, first) -> None:
        if int(first) == 0:
            self.t0 = time.perf_counter()

    def done(self, first, _) -> None:
        chunk = int(first) // self.size + 1
        elapsed = time.perf_counter() - (self.t0 or time.perf_counter())
        left = elapsed / chunk * (self.n_chunks - chunk)
        _print_progress(self.name, min(chunk * self.size, self.n_items), self.n_items, chunk,
                        self.n_chunks, f"{elapsed:.1f}s elapsed, ~{left:.1f}s left")


def _print_progress(name: str, done: int, n_items: int, chunk: int, n_chunks: int, when: str) -> None:
    print(f"[jboost] {name} {done}/{n_items} (chunk {chunk}/{n_chunks})  {when}", flush=True)


def chunk_layout(n_items: int, chunk_size: int) -> Tuple[int, int]:
    """``(n_chunks, size)`` of :func:`map_in_chunks`: ``chunk_size`` evened out over the chunks
    it takes (10 items in chunks of at most 4: 3 chunks of 4, the last padded by 2)."""
    n_chunks = -(-n_items // chunk_size)
    return n_chunks, -(-n_items // n_chunks)


def map_chunks(chunk_fn: Callable[[int, np.ndarray], Any], n_items: int, size: int, *,
               done: Optional[Mapping[int, Any]] = None,
               on_chunk: Optional[Callable[[int, Any], None]] = None,
               progress: Optional[str] = None, what: str = "chunks",
               keeps: Optional[bool] = None,
               callbacks: Sequence[Callable[[Dict[str, Any]], Any]] = (),
               info: Optional[Callable[[int, Any], Dict[str, Any]]] = None,
               at_once: bool = False, keep_on_interrupt: bool = False,
               unit: str = "items", keep: Optional[Callable[[Any], Any]] = None) -> list:
    """``chunk_fn(c, items)`` for every chunk ``c``, called one after another from the host.

    Chunk ``c`` holds items ``c * size .. (c + 1) * size - 1`` (``items``, an int64 host array;
    the last chunk runs past ``n_items``: ``chunk_fn`` pads as it likes). Each chunk is waited
    for before the next is dispatched, so nothing more is queued when ``Ctrl-C`` comes: it
    raises ``KeyboardInterrupt`` at the end of the running chunk (``at_once=True``: at once, the
    wait polling ``is_ready()``; the running chunk then ends in the background and its result
    is dropped), saying how many chunks were finished and whether they were kept (``on_chunk``,
    e.g. checkpoints: a rerun resumes). ``keep_on_interrupt=True``: instead of raising, the
    outputs of the chunks finished so far are returned with a warning (counting them in
    ``unit``, e.g. ``"trees"``); a ``Ctrl-C`` before the first chunk has finished still raises.

    Args:
      done: ``{c: outputs}`` of chunks already computed (e.g. :meth:`ChunkCheckpoints.load`):
        not run again, their outputs taken as they are.
      on_chunk: ``on_chunk(c, outputs)`` after each chunk computed here (e.g.
        :meth:`ChunkCheckpoints.save`).
      progress: a name; then a line per chunk with the items done, the elapsed time and the
        remaining time estimated from the chunks computed here.
      what: the chunks' name in the ``KeyboardInterrupt`` message, e.g. ``"sweep chunks"``.
      keeps: whether ``on_chunk`` keeps finished chunks for a rerun (default: ``on_chunk`` given).
      callbacks: functions called on the host after each chunk (computed here or loaded) with a
        dict: ``info(c, outputs)`` (the caller's entries) plus ``chunk`` (``c``), ``chunks``
        (their number), ``done`` (items finished), ``items`` (their number), ``elapsed``
        (seconds) and ``from_checkpoint``. A callback returning ``True`` stops: no further chunk
        runs, and the outputs of the chunks finished so far are returned (a shorter list).
      keep: ``keep(outputs)`` is what is kept of each chunk (computed or loaded; ``on_chunk``
        and the callbacks see the whole chunk), e.g. a chunk of trees cut to its used slots: the
        full outputs are freed chunk by chunk.

    Returns:
      The chunks' outputs (``keep``'s), in order (a list; shorter when a callback stopped).
    """
    kept_of = (lambda out: out) if keep is None else keep  # noqa: E731
    n_chunks = -(-n_items // size)
    done = {} if done is None else done
    outs, t0, n_run = [], time.perf_counter(), 0
    to_run = sum(1 for c in range(n_chunks) if c not in done)
    computed = kept = 0  # chunks computed here or loaded; of them, those on_chunk returned from

    def stop_after(c, out, loaded) -> bool:
        if not callbacks:
            return False
        entry = dict(info(c, out) if info is not None else {})
        entry.update(chunk=c, chunks=n_chunks, done=min((c + 1) * size, n_items), items=n_items,
                     elapsed=time.perf_counter() - t0, from_checkpoint=loaded)
        return any([bool(cb(entry)) for cb in callbacks])  # every callback sees every chunk

    try:
        for c in range(n_chunks):
            if c in done:
                computed, kept = computed + 1, kept + 1
                if progress is not None:
                    _print_progress(progress, min((c + 1) * size, n_items), n_items, c + 1, n_chunks,
                                    "from the checkpoint")
                outs.append(kept_of(done[c]))
                if stop_after(c, done[c], True):
                    break
                continue
            out = chunk_fn(c, np.arange(c * size, (c + 1) * size))
            out = wait(out) if at_once else jax.block_until_ready(out)
            n_run, computed = n_run + 1, computed + 1
            if on_chunk is not None:
                on_chunk(c, out)
                kept += 1
            if progress is not None:
                elapsed = time.perf_counter() - t0
                _print_progress(progress, min((c + 1) * size, n_items), n_items, c + 1, n_chunks,
                                f"{elapsed:.1f}s elapsed, ~{elapsed / n_run * (to_run - n_run):.1f}s left")
            outs.append(kept_of(out))
            if stop_after(c, out, False):
                break
    except KeyboardInterrupt:
        keeping = on_chunk is not None if keeps is None else keeps
        if keep_on_interrupt and outs:
            n_done = min(len(outs) * size, n_items)
            saved = (f"; {kept} of them are saved (checkpoint_dir): rerunning the same call fits "
                     "only the rest" if keeping else "")
            warnings.warn(f"interrupted (Ctrl-C) after {len(outs)} of {n_chunks} {what}: the model "
                          f"holds the {n_done} of {n_items} {unit} fitted so far{saved}.",
                          UserWarning, stacklevel=2)
            return outs
        saved = (f"{kept} of them saved (checkpoint_dir): rerun the same call to fit only the rest"
                 if keeping else
                 "nothing is kept: pass checkpoint_dir= to keep finished chunks, so that a rerun "
                 "fits only the rest")
        raise KeyboardInterrupt(f"interrupted after {computed} of {n_chunks} {what} were computed; "
                                f"{saved}.") from None
    return outs


def wait(out, longest: float = 0.001):
    """``out`` (a pytree) once every array of it is computed, polling ``is_ready()`` with short
    sleeps (so a ``Ctrl-C`` lands at once; ``jax.block_until_ready`` would hold it until the
    computation ends). Leaves without ``is_ready`` (host arrays) are taken as they are. The
    sleeps grow to ``longest`` seconds: the most a chunk's end is noticed late (the next chunk
    is dispatched only then, so a forest of many short chunks pays it per chunk)."""
    pause = 1e-4
    for leaf in jax.tree_util.tree_leaves(out):
        if callable(getattr(leaf, "is_ready", None)):
            while not leaf.is_ready():
                time.sleep(pause)
                pause = min(2 * pause, longest)
    return out


# --------------------------------------------------------------------------------------------
# Checkpoints of chunks.
# --------------------------------------------------------------------------------------------


def stable_repr(x) -> str:
    """``repr`` with functions and classes by qualified name (a function's default repr holds
    its address, which changes from process to process); tuples (NamedTuples: configs), lists
    and dicts element by element.

    The rule of every checkpoint fingerprint (``jboost.fit``, sweeps, forests)."""
    if isinstance(x, functools.partial):
        return f"partial({stable_repr(x.func)}, {stable_repr(x.args)}, {stable_repr(x.keywords)})"
    if callable(x) and hasattr(x, "__qualname__"):
        return f"{getattr(x, '__module__', '')}.{x.__qualname__}"
    if isinstance(x, tuple):
        return f"{type(x).__name__}({', '.join(stable_repr(v) for v in x)})"
    if isinstance(x, list):
        return f"[{', '.join(stable_repr(v) for v in x)}]"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{stable_repr(k)}: {stable_repr(v)}" for k, v in x.items()) + "}"
    return repr(x)


def fingerprint(arrays: Iterable[Any], settings: Any) -> str:
    """SHA-256 of ``arrays`` (any pytree: every leaf's shape, dtype and bytes; ``jax.random``
    typed keys by their key data) and of :func:`stable_repr` ``(settings)``: what the outputs of
    a checkpointed call depend on, so that its checkpoints are only ever continued by the same
    call."""
    h = hashlib.sha256()
    for leaf in jax.tree_util.tree_leaves(arrays):
        if isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        arr = np.ascontiguousarray(np.asarray(leaf))
        h.update(str((arr.shape, arr.dtype.str)).encode())
        h.update(arr.tobytes())
    h.update(stable_repr(settings).encode())
    return h.hexdigest()


_FINGERPRINT, _ITEMS = "__fingerprint__", "__items__"


class ChunkCheckpoints:
    """The finished chunks of a call (a sweep, a forest), one ``.npz`` file per chunk.

    File ``{kind}-{part}chunk{c:05d}.npz`` in ``directory`` holds the chunk's output arrays
    (named by their pytree path), the chunk's items and the :func:`fingerprint` of the call. It
    is written to a temporary file and renamed (``os.replace``), so a killed process leaves
    whole files only; it is read with ``allow_pickle=False`` (no object is unpickled, no code
    runs). ``part`` names a program's chunks when a call runs several (a sweep's ``(depth,
    n_bins)`` groups).

    Raises ``ValueError`` (naming the file) when ``directory`` holds a ``kind`` file of another
    call (another fingerprint; ``differs`` says what the fingerprint covers), when a file is
    unreadable, or when a chunk's items or array
    shapes are not this call's (e.g. another ``chunk_size``).
    """

    def __init__(self, directory, kind: str, fingerprint_: str, differs: str = "data, keys or settings"):
        if not isinstance(directory, (str, os.PathLike)):
            raise TypeError(f"checkpoint_dir must be a directory path (str or os.PathLike); got "
                            f"{directory!r}.")
        self.directory, self.kind, self.fingerprint = os.fspath(directory), kind, fingerprint_
        os.makedirs(self.directory, exist_ok=True)
        for name in sorted(os.listdir(self.directory)):
            if name.startswith(kind + "-") and name.endswith(".npz"):
                path = os.path.join(self.directory, name)
                if self._read(path, (_FINGERPRINT,))[_FINGERPRINT] != fingerprint_:
                    raise ValueError(
                        f"checkpoint_dir={self.directory!r} holds checkpoints of another {kind} "
                        f"(different {differs}), e.g. {path}: use another "
                        f"directory, or delete its {kind}-*.npz files to start this {kind} there.")

    def path(self, part: str, chunk: int) -> str:
        return os.path.join(self.directory, f"{self.kind}-{part}chunk{chunk:05d}.npz")

    def _read(self, path: str, names: Sequence[str]) -> Dict[str, Any]:
        try:
            with np.load(path, allow_pickle=False) as f:
                return {n: (str(f[n]) if n == _FINGERPRINT else f[n]) for n in names}
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
            raise ValueError(f"checkpoint file {path} is not a readable {self.kind} checkpoint "
                             f"({type(e).__name__}: {e}): delete it (its chunk is fitted again)."
                             ) from None

    def load(self, part: str, n_chunks: int, like: Callable[[], Any],
             items_of: Callable[[int], np.ndarray]) -> Dict[int, Any]:
        """``{c: outputs}`` of the chunks of ``part`` saved so far (host arrays), each checked
        against ``items_of(c)`` and against the structure, shapes and dtypes of ``like()`` (a
        pytree of ``jax.ShapeDtypeStruct``, e.g. from ``jax.eval_shape``; only called when a
        file exists)."""
        done, spec = {}, None
        for c in range(n_chunks):
            path = self.path(part, c)
            if not os.path.exists(path):
                continue
            if spec is None:
                spec = jax.tree_util.tree_flatten_with_path(like())
            leaves, treedef = spec
            names = [jax.tree_util.keystr(k) for k, _ in leaves]
            got = self._read(path, [_ITEMS] + names)
            if not np.array_equal(got[_ITEMS], items_of(c)):
                raise ValueError(f"checkpoint file {path} holds items {got[_ITEMS].tolist()} but "
                                 f"chunk {c} of this {self.kind} has {items_of(c).tolist()} (another "
                                 "chunk_size, memory_budget or number of devices): pass the same "
                                 "ones, or use another directory.")
            for name, (_, want) in zip(names, leaves):
                if got[name].shape != want.shape or got[name].dtype != want.dtype:
                    raise ValueError(f"checkpoint file {path}: {name} is {got[name].dtype}"
                                     f"{list(got[name].shape)}, this {self.kind} makes {want.dtype}"
                                     f"{list(want.shape)}: delete it or use another directory.")
            done[c] = jax.tree_util.tree_unflatten(treedef, [got[n] for n in names])
        return done

    def save(self, part: str, chunk: int, outputs: Any, items: np.ndarray) -> None:
        """Write chunk ``chunk``'s ``outputs`` (waits for them) atomically."""
        arrays = {jax.tree_util.keystr(k): np.asarray(v)
                  for k, v in jax.tree_util.tree_flatten_with_path(outputs)[0]}
        arrays[_FINGERPRINT] = np.asarray(self.fingerprint)
        arrays[_ITEMS] = np.asarray(items)
        path = self.path(part, chunk)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)


def map_checkpointed(chunk_fn: Callable, args: Any, n_items: int, chunk_size: int, *,
                     checkpoint_dir=None, kind: str, settings: Any = None,
                     differs: str = "data, keys or settings", progress: Optional[str] = None,
                     what: str = "chunks", callbacks: Sequence[Callable] = (),
                     info: Optional[Callable[[int, Any], Dict[str, Any]]] = None,
                     at_once: bool = False, keep_on_interrupt: bool = False,
                     unit: str = "items", keep: Optional[Callable[[Any], Any]] = None,
                     combine: Optional[Callable[[list, int], Any]] = None) -> Any:
    """``chunk_fn(*args, items)`` over ``n_items`` items in host-side chunks (:func:`map_chunks`),
    each chunk saved to ``checkpoint_dir`` as it finishes (:class:`ChunkCheckpoints`, files
    ``{kind}-chunk*.npz``, guarded by the :func:`fingerprint` of ``args`` and ``settings``) and
    read back by a rerun instead of computed; ``callbacks`` as :func:`map_chunks` (may stop).

    ``chunk_fn`` (a jitted function, its static settings bound) maps ``(*args, items)`` --
    ``items`` an int32 ``(size,)`` array of item indices, the last chunk's running past
    ``n_items`` -- to a pytree whose leaves have a leading ``(size,)`` axis. The chunks are laid
    out as :func:`map_in_chunks` lays them out (:func:`chunk_layout`). Returns the chunks'
    outputs concatenated along that axis, cut to the items finished (all ``n_items``, or fewer
    when a callback stopped, or a ``Ctrl-C`` with ``keep_on_interrupt``: :func:`map_chunks`).
    Concrete arrays only (not under ``jax.vmap`` or ``jit``). ``keep``: what is kept of each
    chunk (:func:`map_chunks`; checkpoints hold the whole chunk); ``combine(kept, n_done)``: the
    result from the kept chunks and the number of items finished, instead of the concatenation
    (e.g. chunks of different shapes).
    """
    if any(_is_tracer(v) for v in jax.tree_util.tree_leaves(args)):
        raise ValueError("verbose=, checkpoint_dir= and callbacks= need a concrete fit (not under "
                         "jax.vmap or jit).")
    n_chunks, size = chunk_layout(n_items, chunk_size)
    items = lambda c: np.arange(c * size, (c + 1) * size)  # noqa: E731
    done, on_chunk = {}, None
    if checkpoint_dir is not None:
        store = ChunkCheckpoints(checkpoint_dir, kind, fingerprint(args, (settings, size)), differs)
        like = lambda: jax.eval_shape(chunk_fn, *args, jnp.asarray(items(0), jnp.int32))  # noqa: E731
        done = store.load("", n_chunks, like, items)
        on_chunk = lambda c, out: store.save("", c, out, items(c))  # noqa: E731
    outs = map_chunks(lambda c, it: chunk_fn(*args, jnp.asarray(it, jnp.int32)), n_items, size,
                      done=done, on_chunk=on_chunk, progress=progress, what=what,
                      callbacks=callbacks, info=info, at_once=at_once,
                      keep_on_interrupt=keep_on_interrupt, unit=unit, keep=keep)
    n_done = min(len(outs) * size, n_items)
    if combine is not None:
        return combine(outs, n_done)

    return join_chunks(outs, n_done)


def join_chunks(outs: list, n_done: int) -> Any:
    """Chunks' outputs (pytrees of arrays with a leading item axis) concatenated along it, cut
    to the first ``n_done`` items: one copy at most (a large forest's arrays are hundreds of MB;
    each chunk cut to its finished items before the one concatenation)."""

    def join(*chunks):
        parts, start = [], 0
        for x in chunks:
            keep = min(x.shape[0], n_done - start)
            if keep <= 0:
                break
            x = jnp.asarray(x)
            parts.append(x if keep == x.shape[0] else x[:keep])
            start += keep
        return parts[0] if len(parts) == 1 else jnp.concatenate(parts)

    return jax.tree_util.tree_map(join, *outs)


def _is_tracer(x) -> bool:
    return isinstance(x, jax.core.Tracer)


def model_bytes(n_samples: int, n_features: int, depth: int, n_bins: int, n_outputs: int = 1,
                n_rounds: int = 100, trees_per_round: int = 1, keep_trees: bool = False,
                fused: bool = False) -> int:
    """Estimated peak device memory of ONE model of the sweep (bytes).

    The largest live arrays are the level histograms and the per-row state (raw scores,
    gradients, hessians, weights, leaf indices), then the outputs (validation/training curves,
    and the trees when kept). Pure JAX (``fused=False``: GPU, TPU, or CPU without the kernel)
    materialises every level's cumulative histograms, ``F x L x B x 2K`` float32, and the split
    search's fused temporaries: about three last-level histograms' worth (XLA's memory analysis
    measured 1.4-2.5 plus the rows). The CPU kernel's fused levels (``fused=True``) only
    materialise the split gains (``F x (B - 1) x 2``) and the histograms kept for histogram
    subtraction (:func:`jboost.histograms.level_plan`): the previous level's and this one's.
    """
    k = int(n_outputs)
    cell = n_features * n_bins * 2 * k * 4  # one leaf's histograms over all features, bytes
    if fused:
        plan = histograms.level_plan(n_samples, depth, n_bins, channels=2 * k)
        live = [cell * ((2**d if keep else 0) + (2 ** (d - 1) if subtract else 0))
                for d, (subtract, keep) in enumerate(plan)]
        hist = max(live, default=0) + n_features * n_bins * 2 * 4
    else:
        hist = 3 * cell * 2 ** max(int(depth) - 1, 0)
    rows = n_samples * (10 * k + 10) * 4
    out = 2 * n_rounds * 4 + (trees_bytes(depth, k, n_rounds, trees_per_round) if keep_trees else 0)
    return int(hist + rows + out)


def trees_bytes(depth: int, n_outputs: int, n_rounds: int, trees_per_round: int = 1) -> int:
    """Bytes of one boosted model's trees: per tree ``depth`` features, bins, thresholds and
    gains, and ``2^depth x K`` float32 leaf values."""
    return int((4 * 4 * depth + 2**depth * int(n_outputs) * 4) * trees_per_round * n_rounds)


def default_budget(device) -> int:
    if device.platform == "cpu":
        return DEFAULT_CPU_BUDGET
    try:
        limit = device.memory_stats()["bytes_limit"]
        return int(0.5 * limit)
    except Exception:  # noqa: BLE001 - a backend without memory_stats
        return 4 << 30


def auto_chunk_size(per_model_bytes: int, n_models: int, device, memory_budget: Optional[int] = None,
                    max_models: Optional[int] = None) -> int:
    """Models per device in one chunk: as many as ``memory_budget`` holds, at most ``max_models``
    (default: ``DEFAULT_CPU_MODELS_PER_DEVICE`` on CPU, no limit elsewhere) and ``n_models``,
    at least one; then evened out over the chunks that takes (20 models at most 8 per chunk:
    chunks of 7, the last padded by one, rather than 8, 8 and 4 padded by 4)."""
    budget = default_budget(device) if memory_budget is None else int(memory_budget)
    size = max(1, budget // max(per_model_bytes, 1))
    if max_models is None and device.platform == "cpu":
        max_models = DEFAULT_CPU_MODELS_PER_DEVICE
    if max_models is not None:
        size = min(size, int(max_models))
    size = int(max(1, min(size, n_models)))
    n_chunks = -(-max(n_models, 1) // size)
    return -(-max(n_models, 1) // n_chunks)


# Temporary bytes of one forest tree's fit per byte of its deepest histogram when the histograms
# are materialised (pure JAX: GPU, TPU, or CPU without the kernel): ``temp_size_in_bytes`` of
# ``jax.jit(fit_forest_binned).lower(...).compile().memory_analysis()`` divided by
# ``chunk_size * m * 2**(depth-1) * n_bins * C * 4`` was 2.56-2.62 for depths 10 and 14, m = 7 or
# 57, 32 bins, chunks of 1 and 4 (spam's shapes, two classes; trees grown by tree.fit_tree). With
# the fused CPU kernel no histogram of a subset level is materialised: the same programs' temporaries
# were 0.29-0.47 MB per tree (0.004-0.31 of the deepest histogram), about ``3 * depth`` int32 per
# row (levels' leaves, gathered bins) plus the histograms kept for subtraction (bagged trees).
FOREST_HIST_OVERHEAD = 2.6
FOREST_ROW_WORDS_PER_LEVEL = 3


def forest_tree_bytes(n_eligible: int, depth: int, n_bins: int, n_outputs: int, n_samples: int,
                      fused: bool = False, n_features: Optional[int] = None) -> int:
    """Estimated device memory of one forest tree's fit (bytes).

    Args:
      n_eligible: features per level ``m``; ``n_features`` (default ``m``) the total ``F``.
      n_outputs: the forest's K (two classes are fitted as one output).
      fused: the CPU kernel's fused levels (no level histogram materialised, except those kept
        for histogram subtraction when ``m == F``); ``False``: pure JAX, which materialises the
        deepest histogram and ``FOREST_HIST_OVERHEAD`` times it in temporaries.
    """
    k = 1 if n_outputs == 2 else n_outputs
    rows = n_samples * (2 * k + 4) * 4
    if not fused:
        hist = n_eligible * 2 ** max(depth - 1, 0) * n_bins * 2 * k * 4
        return int(FOREST_HIST_OVERHEAD * hist + rows)
    n_features = n_eligible if n_features is None else n_features
    kept = 0
    if n_eligible >= n_features:  # every feature at every level: fit_tree subtracts where it pays
        cell = n_features * n_bins * 2 * k * 4
        plan = histograms.level_plan(n_samples, depth, n_bins, channels=2 * k)
        kept = max([cell * ((2**d if keep else 0) + (2 ** (d - 1) if subtract else 0))
                    for d, (subtract, keep) in enumerate(plan)], default=0)
    return int(rows + n_samples * 4 * FOREST_ROW_WORDS_PER_LEVEL * depth + kept)


def chunk_size_for_budget(n_eligible: int, depth: int, n_bins: int, n_outputs: int, n_samples: int,
                          budget_bytes: Optional[int] = None, fused: bool = False,
                          n_features: Optional[int] = None) -> int:
    """Number of forest bags to fit together (one ``vmap``) so that their arrays fit in
    ``budget_bytes`` (default :data:`DEFAULT_CPU_BUDGET`): the budget over
    :func:`forest_tree_bytes`, at least 1."""
    budget = DEFAULT_CPU_BUDGET if budget_bytes is None else int(budget_bytes)
    per_tree = forest_tree_bytes(n_eligible, depth, n_bins, n_outputs, n_samples, fused, n_features)
    return max(1, int(budget // per_tree))


def kernel_fits(device) -> bool:
    """Whether fits on ``device`` run jboost's fused CPU kernels (a CPU device, kernels built)."""
    return device.platform == "cpu" and _native.available()


def forest_fused(device, n_samples: int, depth: int, n_bins: int, n_outputs: int) -> bool:
    """Whether a forest's trees on ``device`` are grown by the fused CPU kernels: a CPU device
    with the kernels built (:func:`kernel_fits`), and sizes the kernels can index
    (:func:`jboost._native.indexable`; larger ones run in pure JAX)."""
    k = 1 if n_outputs == 2 else int(n_outputs)
    return kernel_fits(device) and _native.indexable(n_samples, 1 << max(depth - 1, 0), n_bins, 2 * k)


def kernel_scratch_bytes(depth: int, n_bins: int, channels: int, n_features: int) -> int:
    """A lower bound of the scratch memory of the fused level kernel at the deepest level
    (bytes): each of its threads keeps about three of one feature's level histograms
    ``2^(depth-1) x n_bins x channels`` float32 (``jboost/_native/level.cc``: the features built
    per pass and the full level), and it uses at most one thread per feature."""
    threads = min(_native.cpu_threads(), max(int(n_features), 1))
    return int(3 * (1 << max(depth - 1, 0)) * n_bins * channels * 4 * threads)


def forest_chunk_size(n_eligible: int, n_features: int, depth: int, n_bins: int, n_outputs: int,
                      n_samples: int, n_trees: int, memory_budget: Optional[int] = None,
                      device=None) -> int:
    """Forest bags per chunk on ``device`` (default: the first device): :func:`auto_chunk_size` of
    :func:`forest_tree_bytes` (fused where :func:`forest_fused`), the policy of every batch of
    models (on CPU at most :data:`DEFAULT_CPU_MODELS_PER_DEVICE` per chunk, chunks evened out)."""
    device = jax.devices()[0] if device is None else device
    per_tree = forest_tree_bytes(n_eligible, depth, n_bins, n_outputs, n_samples,
                                 fused=forest_fused(device, n_samples, depth, n_bins, n_outputs),
                                 n_features=n_features)
    return auto_chunk_size(per_tree, n_trees, device, memory_budget)


#: Bytes of one depth-wise node (``jboost.depthwise.DepthwiseTrees``' table): feature, threshold
#: and two children int32, border and gain float32, missing direction bool.
DEPTHWISE_RULE_BYTES = 25


def forest_bytes(n_eligible: int, n_features: int, depth: int, n_bins: int, n_outputs: int,
                 n_samples: int, n_trees: int, chunk_size: int, device=None,
                 tree_family: str = "oblivious", n_nodes: Optional[int] = None,
                 max_nodes: Optional[int] = None, kernel: Optional[bool] = None,
                 table_rows: Optional[int] = None) -> int:
    """Estimated peak device memory of one forest's fit (bytes): ``chunk_size`` trees' fits
    (:func:`forest_tree_bytes`) at once, the fused kernel's scratch where it runs
    (:func:`kernel_scratch_bytes`), and the outputs of every tree: leaf values
    ``n_trees x 2^depth x K`` (depth-wise: ``n_nodes + 1`` leaves), bootstrap weights
    ``n_trees x n_samples`` float32 and, for depth-wise trees (``tree_family="depthwise"``),
    their ``n_nodes`` table nodes each (:func:`jboost.depthwise.node_capacity`, default
    ``2^depth - 1``; :data:`DEPTHWISE_RULE_BYTES`).

    A depth-wise tree's fit (``max_nodes``: its histogram slots per level, default ``n // 2``)
    holds, with the whole-tree CPU kernel (``kernel``; default: where it runs on ``device``),
    its rows' targets and node lists and a thread's ``(m, n_bins, 2K)`` slot histogram; in pure
    JAX, its widest level's slot histograms (:data:`FOREST_HIST_OVERHEAD` times) and its
    levels' per-node arrays (at most ``2 n`` entries: the open nodes are numbered compactly)."""
    device = jax.devices()[0] if device is None else device
    depthwise = tree_family == "depthwise"
    k = 1 if n_outputs == 2 else int(n_outputs)
    if depthwise:
        fused = False
        kernel = (kernel_fits(device) and _native.indexable(n_samples, 1, n_bins, 2 * k)
                  if kernel is None else bool(kernel))
        slot_hist = n_eligible * n_bins * 2 * k * 4
        rows = n_samples * (2 * k + 4) * 4
        if kernel:
            per_tree = rows + n_samples * 4 * 8 + 3 * slot_hist
        else:
            # (rows sharded over devices: n_samples per device, the slots bounded by the whole
            # table's table_rows, as the sharded levels bound them)
            whole = n_samples if table_rows is None else int(table_rows)
            cap = max(1, whole // 2) if max_nodes is None else int(max_nodes)
            slots = max(1, min(1 << max(depth - 1, 0), cap, whole // 2))
            # the levels' per-node arrays and the node table: at most 2n entries, never 2^depth
            per_tree = int(rows + FOREST_HIST_OVERHEAD * (slots + 1) * slot_hist
                           + min(2 << depth, 2 * n_samples + 2) * 48)
    else:
        fused = forest_fused(device, n_samples, depth, n_bins, n_outputs)
        per_tree = forest_tree_bytes(n_eligible, depth, n_bins, n_outputs, n_samples, fused=fused,
                                     n_features=n_features)
    scratch = kernel_scratch_bytes(depth, n_bins, 2 * k, n_eligible) if fused else 0
    n_nodes = ((1 << depth) - 1 if n_nodes is None else int(n_nodes)) if depthwise else 0
    n_leaves = n_nodes + 1 if depthwise else 1 << depth
    out = n_trees * (n_leaves * int(n_outputs) * 4 + n_samples * 4 + depth * 16
                     + n_nodes * DEPTHWISE_RULE_BYTES)
    return int(chunk_size * per_tree + scratch + out)
