"""Checkpoint fingerprints (stable_repr, fingerprint) and the chunk checkpoint files of batched fits (ChunkCheckpoints)."""

from __future__ import annotations

import functools
import hashlib
import os
import zipfile
from typing import Any, Callable, Dict, Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np


def stable_repr(x) -> str:
    """``repr`` with functions and classes by qualified name (not by address), tuples, lists and
    dicts element by element: the rule of every checkpoint fingerprint."""
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
    """SHA-256 of ``arrays`` (every leaf's shape, dtype and bytes; typed keys by their key data) and
    of :func:`stable_repr` ``(settings)``: what a checkpointed call's outputs depend on."""
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
    """The finished chunks of a call (a sweep, a forest), one ``.npz`` file per chunk, written
    atomically and guarded by the call's :func:`fingerprint` (docs/engine.md, "Checkpoints"). Raises
    ``ValueError`` (naming the file) for a file of another call, an unreadable file, or items or
    shapes that are not this call's."""

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
        """``{c: outputs}`` of the chunks of ``part`` saved so far, each checked against
        ``items_of(c)`` and the structure, shapes and dtypes of ``like()`` (called only when a file
        exists)."""
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
