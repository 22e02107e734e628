"""Fitting many models together: chunks of vmap-ed models as one program (:func:`map_in_chunks`) or
as host-side calls (:func:`map_chunks`, :func:`map_checkpointed`: checkpoints, callbacks,
``Ctrl-C``). See docs/engine.md ("Batching")."""

from __future__ import annotations

import time
import warnings
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jboost import checks
from jboost.engine import checkpoints


def map_in_chunks(fn, n_items: int, chunk_size: int, progress: Optional[str] = None):
    """``fn`` over ``arange(n_items)``: ``lax.map`` over equal chunks (padded; one chunk shape is
    compiled), each chunk one ``vmap``. ``progress``: a name; then a line is printed on the host as
    each chunk finishes (not under an outer ``jax.vmap``)."""
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
    """``chunk_fn(c, items)`` for every chunk ``c`` (items ``c * size .. (c + 1) * size - 1``, an
    int64 host array), called one after another from the host; ``Ctrl-C`` raises at the end of the
    running chunk (``at_once``: at once) or, with ``keep_on_interrupt``, returns the chunks finished
    so far (docs/engine.md, "Batching").

    Args:
      done: ``{c: outputs}`` of chunks already computed (e.g.
        :meth:`jboost.engine.checkpoints.ChunkCheckpoints.load`).
      on_chunk: ``on_chunk(c, outputs)`` after each chunk computed here (e.g. a checkpoint).
      keeps: whether ``on_chunk`` keeps finished chunks for a rerun (default: ``on_chunk`` given).
      callbacks: called on the host after each chunk with a dict (``info(c, outputs)``'s entries,
        ``chunk``, ``chunks``, ``done``, ``items``, ``elapsed``, ``from_checkpoint``); one returning
        ``True`` stops the run.
      keep: ``keep(outputs)`` is what is kept of each chunk.

    Returns:
      The chunks' outputs (``keep``'s), in order (shorter when a callback stopped).
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
    """``out`` (a pytree) once every array of it is computed, polling ``is_ready()`` with sleeps of
    at most ``longest`` seconds, so that a ``Ctrl-C`` lands at once."""
    pause = 1e-4
    for leaf in jax.tree_util.tree_leaves(out):
        if callable(getattr(leaf, "is_ready", None)):
            while not leaf.is_ready():
                time.sleep(pause)
                pause = min(2 * pause, longest)
    return out


def map_checkpointed(chunk_fn: Callable, args: Any, n_items: int, chunk_size: int, *,
                     checkpoint_dir=None, kind: str, settings: Any = None,
                     differs: str = "data, keys or settings", progress: Optional[str] = None,
                     what: str = "chunks", callbacks: Sequence[Callable] = (),
                     info: Optional[Callable[[int, Any], Dict[str, Any]]] = None,
                     at_once: bool = False, keep_on_interrupt: bool = False,
                     unit: str = "items", keep: Optional[Callable[[Any], Any]] = None,
                     combine: Optional[Callable[[list, int], Any]] = None) -> Any:
    """:func:`map_chunks` of ``chunk_fn(*args, items)`` with each chunk saved to ``checkpoint_dir``
    (guarded by the :func:`jboost.engine.checkpoints.fingerprint` of ``args`` and ``settings``) and
    read back by a rerun: the outputs concatenated and cut to the items finished, or
    ``combine(kept, n_done)``."""
    if any(_is_tracer(v) for v in jax.tree_util.tree_leaves(args)):
        raise ValueError("verbose=, checkpoint_dir= and callbacks= need a concrete fit (not under "
                         "jax.vmap or jit).")
    n_chunks, size = chunk_layout(n_items, chunk_size)
    items = lambda c: np.arange(c * size, (c + 1) * size)  # noqa: E731
    done, on_chunk = {}, None
    if checkpoint_dir is not None:
        store = checkpoints.ChunkCheckpoints(checkpoint_dir, kind, checkpoints.fingerprint(args, (settings, size)), differs)
        like = lambda: jax.eval_shape(chunk_fn, *args, checks.device_array(items(0), np.int32))  # noqa: E731
        done = store.load("", n_chunks, like, items)
        on_chunk = lambda c, out: store.save("", c, out, items(c))  # noqa: E731
    outs = map_chunks(lambda c, it: chunk_fn(*args, checks.device_array(it, np.int32)), n_items, size,
                      done=done, on_chunk=on_chunk, progress=progress, what=what,
                      callbacks=callbacks, info=info, at_once=at_once,
                      keep_on_interrupt=keep_on_interrupt, unit=unit, keep=keep)
    n_done = min(len(outs) * size, n_items)
    if combine is not None:
        return combine(outs, n_done)

    return join_chunks(outs, n_done)


def join_chunks(outs: list, n_done: int) -> Any:
    """Chunks' outputs concatenated along their leading item axis and cut to the first ``n_done``
    items, with at most one copy."""

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
