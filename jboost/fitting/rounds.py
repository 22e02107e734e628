"""The host round loop of a fit: compiled calls of rounds, Ctrl-C, callbacks, verbose lines and
checkpoints. See docs/fitting.md."""

from __future__ import annotations

import functools
import os
import time
import warnings
from typing import Callable, NamedTuple, Optional, Sequence

import jax
import numpy as np

from jboost import checks
from jboost.engine import boosting as boosting_lib, calls, checkpoints, sharded, state as state_lib
from jboost.io import loader, reader, writer
from jboost.losses import loss as loss_lib, metrics as metrics_lib, per_sample
from jboost.models import booster as booster_lib


def host_rounds_possible() -> bool:
    """Whether the caller runs outside every JAX transformation (``jit``, ``vmap``, ``grad``), so
    that a fit's rounds can run as host-side calls (:func:`run_rounds`)."""
    try:
        from jax._src import core as _core
        return bool(_core.trace_state_clean())
    except (ImportError, AttributeError):  # a JAX without it: a traced value tells
        return not isinstance(jax.device_put(np.int32(0)), jax.core.Tracer)


def check_concrete_rounds(rounds, who: str = "jboost.fit") -> None:
    """Refuse ``verbose=``, ``callbacks=`` and ``checkpoint_dir=`` (``rounds``: a dict of them)
    inside ``jax.vmap`` / ``jax.jit``."""
    given = [k for k in ("verbose", "callbacks", "checkpoint_dir") if rounds.get(k)]
    if given:
        raise ValueError(f"{who}: {', '.join(k + '=' for k in given)} need a concrete fit (not "
                         "under jax.vmap or jax.jit, where the rounds are one traced program); "
                         "drop them there.")


CHECKPOINT_FILE = "checkpoint.jbm"


def _fingerprint(args, config, n_total: int) -> str:
    """What a checkpoint must match to be continued: the data, key, settings and loss."""
    data, key, hyper, loss, init_raw = args
    return checkpoints.fingerprint((data, key, hyper, loss.params, init_raw),
                                 (config._replace(n_rounds=n_total), loss.name, loss.n_outputs))


class RoundsOutput(NamedTuple):
    """What :func:`run_rounds` returns: ``out`` the BoostOutput of the rounds this call fitted,
    ``start`` the model they continue (``init_model`` or a checkpoint; ``None``: none) and
    ``score`` their per-round validation score (the validation loss without a metric)."""

    out: state_lib.BoostOutput
    start: Optional[booster_lib.Booster]
    score: jax.Array


# Host-side calls of a concrete fit: seconds a call should take once the pace is known (so Ctrl-C
# lands within about that), and the rounds of the first calls, which measure it.
CALL_SECONDS = 0.25
FIRST_CALLS = (1, 2, 4)


def run_rounds(data: state_lib.Data, key, hyper: boosting_lib.Hyperparams, loss: loss_lib.Loss,
               init_raw, config: boosting_lib.BoostConfig, *, start: Optional[booster_lib.Booster] = None,
               resume: Callable, model_of: Callable, verbose: int = 0, callbacks: Sequence[Callable] = (),
               checkpoint_dir=None, checkpoint_every: Optional[int] = None, mesh=None,
               processes=None, units=(1.0, 1.0)) -> RoundsOutput:
    """A concrete fit's ``config.n_rounds`` rounds after ``start``'s as host-side calls of one
    compiled program (:func:`jboost.engine.calls.boost_rounds`); ``resume``, ``model_of``,
    ``mesh`` and ``processes`` (``rows="local"``) as docs/fitting.md describes; ``units``: the
    factors of the losses and validation scores in the progress lines and callbacks (a
    standardised fit's, :mod:`jboost.fitting.standardise`). A checkpoint holding every round
    fits nothing: its model is ``start``, followed by no round."""
    base = 0 if start is None else start.n_rounds
    total = base + config.n_rounds
    fixed = bool(verbose) or bool(callbacks) or checkpoint_dir is not None or processes is not None
    chunk = int(checkpoint_every or verbose or max(1, -(-config.n_rounds // 20))) if fixed else None
    if processes is not None and not processes.is_first:
        verbose = 0  # chunks as process 0's; its progress lines only
    path, fingerprint, start, best = _checkpoint_start(
        checkpoint_dir, (data, key, hyper, loss, init_raw), config, total, start)
    done = 0 if start is None else start.n_rounds  # rounds of the whole fit so far
    first = done - base  # this call's first position in the buffers
    n_rows = data.y.shape[0]
    # One program for every number of rounds: calls of at most ROUNDS_PER_CALL rounds, each
    # writing its rounds from index 0 of buffers of that size (copied to the host after it).
    capacity = calls.ROUNDS_PER_CALL
    call_config = config._replace(n_rounds=capacity)
    call, data_run, rows = _rounds_fn(mesh, data, call_config)
    carry = calls.rounds_template(data_run, key, hyper, loss, init_raw, call_config)
    fresh = start is None
    carry = _first_carry(carry, start, resume, rows, config, first, done, best, processes)
    metric = calls.eval_metric_of(config)
    metric_name = None if metric is None else metrics_lib.metric_name(metric)
    t0 = _clock()  # the progress lines' clock; the pace of the calls is timed by perf_counter
    last_t, chunk_seconds, chunk_rounds = t0, [], []
    queue, dispatched, pos = [], first, first  # calls in flight; positions dispatched, fitted
    latest, pace, last_done = None, None, None  # the last finished call; seconds per round
    fitted = _HostRounds(first)  # the rounds fitted so far, on the host
    reported = first  # fixed calls: the position up to which progress and callbacks have run

    n_calls, stop = 0, _finished(carry, fitted, config, first, processes)
    latest = carry if stop else None
    try:
        while True:
            while len(queue) < 2 and dispatched < config.n_rounds and not stop:
                end = min(config.n_rounds, dispatched + _call_size(
                    n_calls, dispatched, first, chunk if fixed else None, pace))
                prev = queue[-1][0] if queue else (latest if latest is not None else carry)
                out = _dispatch(call, verbose and n_calls == 0, data_run, key, hyper, init_raw,
                                prev, np.int32(base), np.int32(end), np.bool_(fresh and n_calls == 0))
                queue.append((out, time.perf_counter(), end))
                dispatched, n_calls = end, n_calls + 1
            if not queue:
                break
            out, sent, asked_end = queue.pop(0)
            _wait(out.done)
            finished = time.perf_counter()
            reached = int(out.done)
            if reached != asked_end and not bool(out.stopped):  # never a fit silently cut short
                raise RuntimeError(f"internal error: a call of the rounds ended at position "
                                   f"{reached}, not {asked_end}; please report it.")
            if last_done is not None and reached > pos:  # the first call's time includes compiling
                pace = (finished - max(sent, last_done)) / (reached - pos)
            fitted.add(out.rounds if processes is None else processes.localize(out.rounds),
                       reached - pos)
            # The commit: one statement of plain stores (no call, so no Ctrl-C inside it). Until
            # it runs, ``pos`` and ``latest`` are the previous call's; a Ctrl-C before it cuts
            # ``fitted`` back to ``pos`` below, so the rounds, the state and the warning agree.
            pos, latest, last_done = reached, out, finished
            stop = bool(out.stopped) or pos >= config.n_rounds
            chunk_done = fixed and pos > reported and (stop or (pos - first) % chunk == 0)
            if chunk_done:
                now = last_t = _timed(chunk_seconds, chunk_rounds, last_t, pos - reported)
                asked = _after_call(fitted, out.best, reported, pos, base, total, t0, now, stop,
                                    (chunk_seconds, chunk_rounds), metric_name, verbose, callbacks, units)
                reported = pos
                stop = (asked if processes is None else processes.any(asked)) or stop
                if path is not None:
                    _save_checkpoint(path, fingerprint, config, model_of(
                        _rounds_output(out, fitted, config, n_rows), start), out.best)
            if stop:
                break
    except KeyboardInterrupt:
        if latest is None or pos == first:
            raise
        fitted.cut(pos)  # rounds added by a call whose commit the Ctrl-C stopped
        warnings.warn(f"interrupted after round {base + pos} of {total}: the model holds the rounds "
                      "fitted so far.", UserWarning, stacklevel=4)
    if processes is not None:  # replicated results as this process's arrays
        latest = processes.localize(latest)
    return RoundsOutput(_rounds_output(latest, fitted, config, n_rows), start,
                        jax.device_put(fitted.rounds().score))


def _finished(carry, fitted: "_HostRounds", config, first: int, processes) -> bool:
    """Whether a fit starting at position ``first`` (a checkpoint's) has nothing left to fit: the
    checkpoint holds every round, or its early stopping ended it. Then ``fitted`` gets no round
    (the model is the checkpoint's, followed by none)."""
    if first < config.n_rounds and not bool(carry.stopped):
        return False
    fitted.add(carry.rounds if processes is None else processes.localize(carry.rounds), 0,
               empty=True)
    return True


def _call_size(i: int, at: int, first: int, chunk: Optional[int], pace) -> int:
    """The rounds of call ``i``, dispatched at position ``at``: up to the end of its chunk, else
    :data:`FIRST_CALLS`, then about :data:`CALL_SECONDS` at ``pace`` seconds a round."""
    capacity = calls.ROUNDS_PER_CALL
    if chunk is not None:
        return min(capacity, chunk - (at - first) % chunk)
    if pace is None:
        return min(capacity, FIRST_CALLS[min(i, len(FIRST_CALLS) - 1)])
    return min(capacity, max(1, int(CALL_SECONDS / max(pace, 1e-9))))


def _dispatch(call, announce: bool, *args):
    """``call(*args)``; with ``announce`` (a verbose fit's first call, which builds the program:
    seconds, or tens of seconds, when it compiles) a line before it and one saying how long the
    program took to be ready."""
    if not announce:
        return call(*args)
    print("[jboost] building the fit's program (compiled once per data shape and static "
          "settings, loaded from the compilation cache when kept) ...", flush=True)
    started = time.perf_counter()
    out = call(*args)
    print(f"[jboost] program ready in {time.perf_counter() - started:.1f}s", flush=True)
    return out


def _timed(chunk_seconds: list, chunk_rounds: list, since: float, n_rounds: int) -> float:
    """The clock now, with the chunk that ended appended to the chunks' times."""
    now = _clock()
    chunk_seconds.append(now - since)
    chunk_rounds.append(n_rounds)
    return now


def _checkpoint_start(checkpoint_dir, args, config: boosting_lib.BoostConfig, total: int, start):
    """``(path, fingerprint, start, best)`` of a fit with ``checkpoint_dir``: a checkpoint of
    the same fit is where it continues (``start``, early-stopping record ``best``)."""
    if checkpoint_dir is None:
        return None, None, start, None
    path = os.path.join(os.fspath(checkpoint_dir), CHECKPOINT_FILE)
    best, loss = None, args[3]
    os.makedirs(os.fspath(checkpoint_dir), exist_ok=True)
    fingerprint = _fingerprint(args, config, total)
    if os.path.exists(path):
        header = reader.read_header(path)
        meta = header.get("metadata") or {}
        if meta.get("fingerprint") != fingerprint:
            raise ValueError(f"checkpoint_dir={checkpoint_dir!r} holds a checkpoint of another fit "
                             "(different data, key or settings): use another directory or "
                             f"delete {path}.")
        start = loader.load(path, loss=None if per_sample.is_built_in(loss) else loss)
        if config.early_stopping is not None and meta.get("best_round") is not None:
            best = (np.float32(meta["best_score"]), np.int32(meta["best_round"]))
    return path, fingerprint, start, best


def _first_carry(carry, start, resume, rows, config: boosting_lib.BoostConfig, first: int,
                 done: int, best, processes):
    """The carry of the first call: ``start``'s state from position ``first`` and the
    early-stopping record so far."""
    if start is not None:
        state = resume(start)
        carry = carry._replace(state=state._replace(base=rows(state.base), pending=rows(state.pending)),
                               done=np.int32(first))
    if config.early_stopping is not None:
        best = best if best is not None else (np.float32(np.inf), np.int32(done - 1))
        carry = carry._replace(best=best, stopped=np.bool_(
            first > 0 and done - 1 - int(best[1]) >= config.early_stopping.rounds))
    if processes is not None:  # sharded as the calls' outputs: one compiled program
        carry = processes.place_carry(carry)
    return carry


def _save_checkpoint(path: str, fingerprint, config: boosting_lib.BoostConfig, model, best) -> None:
    """The checkpoint of the rounds so far, with the fingerprint and early-stopping record."""
    meta = {"fingerprint": fingerprint}
    if config.early_stopping is not None:
        meta.update(best_round=int(best[1]), best_score=float(best[0]))
    writer.save(model, path, metadata=meta)


class _HostRounds:
    """The rounds of a fit's calls joined on the host (NumPy: nothing compiled per number of
    rounds); ``first``: the position of the first round added."""

    def __init__(self, first: int):
        self.first, self.parts, self._joined = first, [], None

    def add(self, rounds: calls.Rounds, count: int, empty: bool = False) -> None:
        """Append the first ``count`` rounds of a call's buffers (``empty``: even none)."""
        if count > 0 or empty:
            self.parts.append(jax.tree_util.tree_map(lambda b: np.asarray(b)[:count], rounds))
            self._joined = None

    def cut(self, end: int) -> None:
        """Keep positions ``first..end - 1`` only."""
        joined = self.rounds(None, end)
        self.parts, self._joined = [joined], joined

    def rounds(self, lo: Optional[int] = None, hi: Optional[int] = None) -> calls.Rounds:
        """Positions ``lo..hi - 1`` of the fit (default: all added), joined."""
        if self._joined is None:
            self._joined = jax.tree_util.tree_map(lambda *p: np.concatenate(p, axis=0), *self.parts)
            self.parts = [self._joined]
        lo = 0 if lo is None else lo - self.first
        hi = None if hi is None else hi - self.first
        return jax.tree_util.tree_map(lambda a: a[lo:hi], self._joined)


def _wait(x, longest: float = 0.005):
    """Block until ``x`` is computed, polling ``is_ready()`` with short sleeps (so a ``Ctrl-C``
    lands at once; ``block_until_ready`` would hold it until the computation ends)."""
    pause = 1e-4
    while not x.is_ready():
        time.sleep(pause)
        pause = min(2 * pause, longest)


def _rounds_output(carry: calls.RoundsCarry, fitted: _HostRounds, config,
                   n_rows: int) -> state_lib.BoostOutput:
    """The BoostOutput of the rounds ``fitted`` after the last call ``carry`` (its state cut to
    the ``n_rows`` training rows)."""
    r = jax.tree_util.tree_map(jax.device_put, fitted.rounds())  # (jnp.asarray would compile)
    state = carry.state
    if state.base.shape[0] != n_rows:
        state = state._replace(base=state.base[:n_rows], pending=state.pending[:n_rows])
    out = state_lib.BoostOutput(r.trees, r.train_loss, r.valid_loss, state.loss, dict(r.info),
                               state.extra, state)
    if config.early_stopping is not None:
        out = out._replace(best_round=carry.best[1], n_fitted=r.train_loss.shape[0],
                           best_score=carry.best[0])
    return out


def _after_call(fitted: _HostRounds, best, a, b, base, total, t0, now, stopped, pace,
                metric_name, verbose, callbacks, units) -> bool:
    """A progress line and the callbacks after positions ``a..b - 1``; whether to stop
    (``pace``: the chunks' seconds and rounds so far)."""
    chunk_seconds, chunk_rounds = pace
    r = fitted.rounds(a, b)
    train, valid = r.train_loss * units[0], r.valid_loss * units[0]
    scores = None if metric_name is None else r.score * units[1]
    done, elapsed = base + b, now - t0
    best = None if isinstance(best, tuple) and not best else best
    if verbose:
        # The first chunk's pace includes the program's first run: an estimate after the next.
        left = (0.0 if stopped else None if len(chunk_seconds) < 2
                else time_left(chunk_seconds, chunk_rounds, total - done))
        left_txt = "" if left is None else f", ~{left:.1f}s left"
        best_txt = "" if best is None else f"  best round {int(best[1])}"
        print(f"[jboost] round {done}/{total}  train loss {train[-1]:.6g}"
              + ("" if np.isnan(valid[-1]) else f"  valid loss {valid[-1]:.6g}")
              + ("" if scores is None else f"  valid {metric_name} {scores[-1]:.6g}") + best_txt
              + f"  {elapsed:.1f}s elapsed{left_txt}", flush=True)
    stop = False
    for callback in callbacks or ():
        info = {"round": done, "rounds": list(range(base + a, done)), "train_loss": train,
                "valid_loss": valid, "elapsed": elapsed}
        if scores is not None:
            info.update(metric=metric_name, valid_metric=scores)
        if callback(info):
            stop = True
    return stop


def _rounds_fn(mesh, data: state_lib.Data, config):
    """``(call, data, rows)``: :func:`calls.boost_rounds` with ``config``, or its sharded form
    over ``mesh`` with the rows padded to a multiple of the devices (``rows`` pads likewise)."""
    if mesh is None:
        return functools.partial(calls.boost_rounds, config=config), data, lambda a: a
    padded, rows = sharded.pad_rows(data, mesh.shape[mesh.axis_names[0]])
    return functools.partial(sharded.boost_rounds_sharded, mesh, config=config), padded, rows


_clock = time.perf_counter  # the progress lines' clock (a test replaces it)


def time_left(chunk_seconds: Sequence[float], chunk_rounds: Sequence[int], rounds_left: int) -> float:
    """Seconds the ``rounds_left`` remaining rounds should take, at the pace of the chunks run
    so far after the first (whose time includes compiling), or the first's alone."""
    seconds, rounds = list(chunk_seconds), list(chunk_rounds)
    if len(seconds) > 1:
        seconds, rounds = seconds[1:], rounds[1:]
    return float(sum(seconds)) / max(int(sum(rounds)), 1) * rounds_left


def host_fit(*values) -> bool:
    """Whether a fit may run its chunks as host-side calls: outside every JAX transformation,
    with no traced value among ``values``."""
    return host_rounds_possible() and not any(
        checks.is_traced(v) for v in jax.tree_util.tree_leaves(values))
