"""The host loop of a sweep's group: its chunks of models one after another, each fitted as calls
of a few rounds of its :class:`jboost.sweep.program.BlockProgram` (about :data:`CALL_SECONDS`
each, so that ``Ctrl-C`` lands within one), their checkpoints, callbacks and progress, and what
an interrupted group keeps: the chunks finished and the rounds of the chunk it was fitting.

See docs/sweeps.md ("Chunks and devices", "Stopping a sweep")."""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Dict, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from jboost.engine import batching, boosting as boosting_lib, checkpoints as checkpoints_lib
from jboost.losses import loss as loss_lib
from jboost.sweep import (categorical as sweep_categorical, grid as grid_lib,
                          program as sweep_program)
from jboost.trees import oblivious

#: The most rounds one call of a group's program fits (its buffers).
ROUNDS_PER_CALL = 1024
#: The seconds a call should take once the pace is known (a Ctrl-C lands within about that).
CALL_SECONDS = 1.0
#: The rounds of a chunk's first calls while the pace is not known (the first call compiles).
FIRST_CALLS = (1, 2, 4)

#: The ``stop`` list entry of a sweep that Ctrl-C interrupted (a callback's is ``True``).
INTERRUPTED = "interrupted"


def rounds_per_call(n_rounds: int) -> int:
    """The rounds a group of ``n_rounds`` rounds fits at most per call (a static setting of its
    program)."""
    return max(1, min(int(n_rounds), ROUNDS_PER_CALL))


class GroupFit(NamedTuple):
    """Every model of a ``(depth, n_bins)`` group, fitted (host arrays)."""

    valid: np.ndarray                # (n_models, R) float64
    train: np.ndarray                # (n_models, R) float64
    baseline: Optional[np.ndarray]   # (n_models, K) when trees are kept
    trees: Optional[oblivious.ObliviousTrees]  # (n_models, R, T, ...) when kept
    n_chunks: int
    first_chunk_seconds: float
    n_fitted: Optional[np.ndarray] = None  # (n_models,) early stopping: rounds each model fitted
    n_resumed: int = 0                     # chunks read from checkpoints instead of fitted
    n_models_fitted: Optional[int] = None  # a callback stopped: the models fitted (the rest NaN)
    cat: Optional[sweep_categorical.CatOut] = None  # categorical columns, kept trees
    rounds_done: Optional[np.ndarray] = None  # (n_models,) Ctrl-C: the rounds each model fitted


def not_fitted(n_models: int, n_rounds: int, stopping: bool) -> GroupFit:
    """A group an interrupted sweep did not reach: NaN curves, no trees, no rounds."""
    nan = np.full((n_models, n_rounds), np.nan)
    return GroupFit(nan, nan.copy(), None, None, 0, 0.0,
                    np.zeros(n_models, np.int64) if stopping else None, 0, 0, None,
                    np.zeros(n_models, np.int64))


class _Pace:
    """The seconds per round of a group's calls (``None`` until a call after the first has
    timed it) and the chunk being fitted: its number and the calls finished (for a Ctrl-C)."""

    def __init__(self):
        self.seconds, self.chunk, self.parts, self.shapes = None, None, [], None

    def call_size(self, i: int, capacity: int) -> int:
        """The rounds of a chunk's call ``i``."""
        if self.seconds is None:
            return min(capacity, FIRST_CALLS[min(i, len(FIRST_CALLS) - 1)])
        return min(capacity, max(1, int(CALL_SECONDS / max(self.seconds, 1e-9))))


def fit_in_calls(program: sweep_program.BlockProgram, inputs: tuple, carry, n_rounds: int,
                 like: Callable[[], sweep_program.ChunkOut], pace: _Pace) -> sweep_program.ChunkOut:
    """A chunk's models fitted to ``n_rounds`` rounds as calls of ``program`` from ``carry`` (its
    :meth:`jboost.sweep.program.BlockProgram.first_carry`): each call waited for by polling (so
    that a ``Ctrl-C`` lands at once), its rounds copied to the host and appended to
    ``pace.parts``; with early stopping the calls end when every model has stopped. ``like()``:
    the chunk's shapes."""
    pos, i, parts = 0, 0, []
    pace.parts = parts
    while pos < n_rounds:
        end = min(n_rounds, pos + pace.call_size(i, program.rounds_per_call))
        sent = time.perf_counter()
        carry, out = program(*inputs, carry, np.int32(pos), np.int32(end))
        batching.wait(out)
        host = jax.tree_util.tree_map(np.asarray, out)
        if pace.shapes is None:  # a chunk's shapes, read off a call's outputs (nothing traced)
            pace.shapes = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype),
                                                 host)
        if i > 0:  # the first call's time includes compiling
            pace.seconds = (time.perf_counter() - sent) / (end - pos)
        parts.append((pos, end, host))  # the commit: these rounds are kept on a Ctrl-C
        pos, i = end, i + 1
        if host.stopped is not None and bool(np.all(host.stopped)):
            break
    return assemble(like(), parts)


def assemble(like: sweep_program.ChunkOut, parts) -> sweep_program.ChunkOut:
    """A :class:`jboost.sweep.program.ChunkOut` of ``like``'s shapes from calls'
    ``(start, end, BlockOut)``: the rounds not fitted NaN (zero trees), as the program leaves the
    rounds after a model's stop."""
    def blank(s, fill):
        return np.full(s.shape, fill if np.issubdtype(s.dtype, np.floating) else 0, s.dtype)

    out = jax.tree_util.tree_map(lambda s: blank(s, np.nan), like._replace(trees=None))
    trees = (None if like.trees is None
             else jax.tree_util.tree_map(lambda s: blank(s, 0), like.trees))
    for start, end, block in parts:
        n = end - start
        out.valid[:, start:end] = block.valid[:, :n]
        out.train[:, start:end] = block.train[:, :n]
        if trees is not None:
            for dst, src in zip(jax.tree_util.tree_leaves(trees),
                                jax.tree_util.tree_leaves(block.trees)):
                dst[:, start:end] = src[:, :n]
    if not parts:
        return out._replace(trees=trees)
    last = parts[-1][2]
    return out._replace(trees=trees, baseline=last.baseline, cat=last.cat,
                        n_fitted=None if last.n_fitted is None
                        else last.n_fitted.astype(like.n_fitted.dtype))


def chunk_like(out: sweep_program.BlockOut, n_rounds: int) -> sweep_program.ChunkOut:
    """The shapes of a chunk's :class:`jboost.sweep.program.ChunkOut` from those of a call's
    :class:`jboost.sweep.program.BlockOut`."""
    def rounds(s):
        return jax.ShapeDtypeStruct((s.shape[0], n_rounds) + tuple(s.shape[2:]), s.dtype)
    trees = None if out.trees is None else jax.tree_util.tree_map(rounds, out.trees)
    return sweep_program.ChunkOut(rounds(out.valid), rounds(out.train), out.baseline, trees,
                                  out.n_fitted, out.cat)


def fit_group(program: sweep_program.BlockProgram, shared: sweep_program.Shared,
              grid: grid_lib.Grid, loss: loss_lib.Loss, layout: grid_lib.Layout,
              models_per_call: int, n_rounds: int, stopping: bool = False, *,
              log: Optional[Callable[[int, int, bool], None]] = None,
              checkpoints: Optional[checkpoints_lib.ChunkCheckpoints] = None, part: str = "",
              callbacks=(), stop: Optional[list] = None) -> GroupFit:
    """Fit every model of ``layout`` to ``n_rounds`` rounds with ``program``, ``models_per_call``
    at a time (the last call padded by repeating the last model); ``log(chunk, n_chunks,
    resumed)`` after each chunk. ``checkpoints`` save each chunk (``part`` files) and read those
    saved; a callback returning ``True`` stops, and the models not fitted (in later groups too,
    through ``stop``) get NaN curves. A ``Ctrl-C`` keeps the chunks finished and the rounds of
    the chunk being fitted (``rounds_done``; none: :func:`not_fitted`) and appends
    :data:`INTERRUPTED` to ``stop``. ``stopping``: the program stops its fits early."""
    n_models = layout.n_models
    stop = [] if stop is None else stop
    n_chunks = math.ceil(n_models / models_per_call)
    order = np.minimum(np.arange(n_chunks * models_per_call), n_models - 1)  # the padding repeats
    models_of = lambda c: order[c * models_per_call:(c + 1) * models_per_call]  # noqa: E731
    inputs = _inputs(shared, grid, loss, layout, models_of)
    first_s, pace, finished, cache = [], _Pace(), {}, {}

    def carry():
        if "carry" not in cache:  # one placed template for every chunk: its values are not read
            cache["carry"] = program.first_carry(*inputs(0))
        return cache["carry"]

    def like():
        if "like" not in cache:
            shapes = pace.shapes or program.out_shapes(*inputs(0), carry=carry())
            cache["like"] = chunk_like(shapes, n_rounds)
        return cache["like"]

    def run(c, _):
        t0, pace.chunk = time.perf_counter(), c
        out = fit_in_calls(program, inputs(c), carry(), n_rounds, like, pace)
        first_s.append(time.perf_counter() - t0)
        return out

    def on_chunk(c, out):
        finished[c] = out
        if checkpoints is not None:
            checkpoints.save(part, c, out, models_of(c))
        if log is not None:
            log(c, n_chunks, False)

    done = {}
    if checkpoints is not None:
        done = checkpoints.load(part, n_chunks, like, models_of)
        finished.update(done)
        for c in sorted(done) if log is not None else ():
            log(c, n_chunks, True)

    def info(c, out):
        idx = [int(i) for i in range(c * models_per_call, (c + 1) * models_per_call)
               if i < n_models]
        return {"models": idx, "valid_curves": np.asarray(out.valid)[:len(idx)],
                "train_curves": np.asarray(out.train)[:len(idx)]}

    def stopping(entry):
        # The models, not the padding.
        entry = {**entry, "done": min(entry["done"], n_models), "items": n_models}
        if any([bool(cb(entry)) for cb in callbacks]):
            stop.append(True)
            return True
        return False

    rounds_done = None
    try:
        outs = [] if stop else batching.map_chunks(
            run, n_chunks * models_per_call, models_per_call, done=done, on_chunk=on_chunk,
            what="sweep chunks", keeps=checkpoints is not None,
            callbacks=[stopping] if callbacks else (), info=info)
    except KeyboardInterrupt:
        stop.append(INTERRUPTED)
        outs, rounds_done = _kept(finished, pace, n_chunks, models_per_call, n_rounds, like)
        if not outs:  # no round of this group: as a group the sweep did not reach
            return not_fitted(n_models, n_rounds, stopping)._replace(n_chunks=n_chunks,
                                                                    n_resumed=len(done))
    return _joined(outs, n_chunks, n_models, models_per_call, like, first_s, len(done),
                   rounds_done)


def _inputs(shared, grid, loss, layout, models_of) -> Callable[[int], tuple]:
    """``inputs(c)``: the program's inputs for chunk ``c`` (its models' settings, folds, seeds)."""
    def inputs(c):
        idx = models_of(c)
        pts = layout.point[idx]
        hyper = boosting_lib.Hyperparams(*(jnp.asarray(grid.hyper_values[h][pts])
                                           for h in grid_lib.HYPERPARAMETERS))
        loss_c = loss.replace(params={p: jnp.asarray(v[pts]) for p, v in grid.loss_values.items()})
        args = (*shared[:5], hyper, loss_c, jnp.asarray(layout.fold[idx], jnp.int32),
                jnp.asarray(layout.seed[idx], jnp.int32))
        if shared.rows is not None:
            return args + (shared.rows,)
        if shared.categorical is None:
            return args
        point = sweep_categorical.CatPoint(jnp.asarray(grid.cat_values["cat_prior"][pts]),
                                           jnp.asarray(grid.cat_values["cat_prior_weight"][pts]))
        return args + (shared.categorical, point)
    return inputs


def _kept(finished: Dict[int, Any], pace: _Pace, n_chunks: int, models_per_call: int,
          n_rounds: int, like):
    """After a ``Ctrl-C``: the chunks in order up to the last one with a round fitted (the
    chunks finished, the rounds of the one being fitted) and the rounds of each model."""
    outs, done = [], np.zeros(n_chunks * models_per_call, np.int64)
    partial = (pace.chunk is not None and pace.chunk not in finished and pace.parts
               and pace.parts[-1][1] > 0)
    last = max(list(finished) + ([pace.chunk] if partial else []), default=-1)
    for c in range(last + 1):
        if c in finished:
            outs.append(finished[c])
            done[c * models_per_call:(c + 1) * models_per_call] = n_rounds
        elif c == pace.chunk and partial:
            outs.append(assemble(like(), pace.parts))
            done[c * models_per_call:(c + 1) * models_per_call] = pace.parts[-1][1]
        else:
            outs.append(jax.tree_util.tree_map(
                lambda s: np.full(s.shape, np.nan if np.issubdtype(s.dtype, np.floating) else 0,
                                  s.dtype), like()))
    return outs, done


def _joined(outs, n_chunks: int, n_models: int, models_per_call: int, like, first_s,
            n_resumed: int, rounds_done) -> GroupFit:
    """The :class:`GroupFit` of the chunks' outputs ``outs``; the chunks missing (a callback or
    a ``Ctrl-C`` stopped) NaN (never ranked)."""
    n_run = len(outs)
    if n_run < n_chunks:
        blank = jax.tree_util.tree_map(
            lambda s: np.full(s.shape, np.nan if np.issubdtype(s.dtype, np.floating) else 0,
                              s.dtype), like())
        outs = outs + [blank] * (n_chunks - n_run)

    def gather(*parts):
        return np.concatenate([np.asarray(p) for p in parts])[:n_models]

    valid = gather(*(o.valid for o in outs)).astype(np.float64)
    train = gather(*(o.train for o in outs)).astype(np.float64)
    baseline = trees = n_fitted = cat = None
    if outs[0].trees is not None:
        baseline = gather(*(o.baseline for o in outs))
        trees = jax.tree_util.tree_map(gather, *(o.trees for o in outs))
    if outs[0].cat is not None:
        cat = jax.tree_util.tree_map(gather, *(o.cat for o in outs))
    if outs[0].n_fitted is not None:
        n_fitted = gather(*(o.n_fitted for o in outs)).astype(np.int64)
    if rounds_done is not None:
        rounds_done = rounds_done[:n_models]
        n_run = n_chunks  # the models not fitted have no rounds (rounds_done), not a stop
    return GroupFit(valid, train, baseline, trees, n_chunks, first_s[0] if first_s else 0.0,
                    n_fitted, n_resumed,
                    None if n_run == n_chunks else min(n_run * models_per_call, n_models), cat,
                    rounds_done)
