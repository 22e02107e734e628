"""The model file format and its NumPy-only reader: constants, checksum, read/read_header and
predict_numpy (stdlib + NumPy imports only: copyable alone). See docs/io.md."""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from typing import Any, Dict

import numpy as np

FORMAT = "jboost-model"
FORMAT_VERSION = 5  # every version up to it loads; what each added: docs/io.md
HEADER = "__header__"

# The dtypes a model file may hold (no object, string or structured arrays).
DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64")


class ModelFileError(ValueError):
    """A model file that cannot be read: not a jboost model file, truncated, corrupted, edited
    (checksum), of an unknown model type, of a newer format version, or with arrays that do
    not fit the model's structure."""


def checksum(header: Dict[str, Any], arrays: Dict[str, np.ndarray]) -> str:
    """SHA-256 over the header (without its checksum, canonical JSON) and every array's name,
    dtype, shape and bytes, in name order."""
    h = hashlib.sha256()
    body = {k: v for k, v in header.items() if k != "checksum"}
    h.update(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())
    for name in sorted(arrays):
        a = arrays[name]
        h.update(json.dumps([name, a.dtype.str, list(a.shape)]).encode())
        h.update(a.tobytes(order="C"))
    return "sha256:" + h.hexdigest()


def file_error(path, what: str) -> ModelFileError:
    """The :class:`ModelFileError` saying that ``path`` is not a readable model file: ``what``."""
    return ModelFileError(f"{os.fspath(path)!s} is not a readable jboost model file: {what}")


#: The most bytes the compressed (deflated, ...) members of one file may expand to, together.
#: ``jboost.save`` writes its members stored, uncompressed (as ``np.savez``; every format version
#: did), whose bytes are in the file itself; a compressed member (a file zipped again) is bounded
#: by the size it declares, checked against this before anything is decompressed, and
#: decompressed in chunks up to that size (docs/io.md, "Bounded reading").
MAX_INFLATED_BYTES = 1 << 30

#: The bytes a member is decompressed or copied in at a time.
CHUNK_BYTES = 1 << 20


def read(path):
    """Check a model file and read it with NumPy only: ``(header, {key path: np.ndarray})``.
    Every member is read within the size it declares (compressed ones within
    :data:`MAX_INFLATED_BYTES` in all), before anything of that size is allocated.

    Raises:
      ModelFileError: not a jboost model file of a format version this jboost reads, an object
        array, arrays other than the header lists, a member larger than its declared size or than
        the limits, or a checksum that does not match.
      FileNotFoundError: no such file.
    """
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        raise file_error(path, "the file is empty.")
    if not data.startswith(b"PK"):
        raise file_error(path, "it is not a zip (.npz) archive.")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = {n[:-4] if n.endswith(".npy") else n: n for n in archive.namelist()}
    except Exception as e:  # noqa: BLE001 - any parse failure of untrusted bytes is a bad file
        raise file_error(path, f"the archive cannot be opened ({type(e).__name__}: {e}); the file is "
                          "truncated or corrupted.") from None
    with archive:
        budget = _Budget(len(data))
        if HEADER not in members:
            raise file_error(path, f"it has no {HEADER!r} member (not written by jboost.save).")
        header = _read_header(path, archive, members[HEADER], budget)
        listed = header["arrays"]
        names = set(members)
        missing = sorted(set(listed) - names)
        extra = sorted(names - set(listed) - {HEADER})
        if missing:
            raise file_error(path, f"the arrays {missing} listed in its header are missing.")
        if extra:
            raise file_error(path, f"it holds arrays {extra} that its header does not list.")
        arrays = {}
        for name, spec in listed.items():
            a = _member(path, archive, members[name], budget)
            if a.dtype.name != spec.get("dtype") or list(a.shape) != spec.get("shape"):
                raise file_error(path, f"array {name!r} is {a.dtype.name} {list(a.shape)}; its header says "
                                  f"{spec.get('dtype')} {spec.get('shape')}.")
            arrays[name] = a
    if checksum(header, arrays) != header.get("checksum"):
        raise file_error(path, "its checksum does not match its contents: the file was corrupted or "
                          "edited after jboost.save wrote it.")
    return header, arrays


class _Budget:
    """What the members of one file may still expand to: a stored member's bytes lie in the
    file (``file_bytes``), the compressed members share :data:`MAX_INFLATED_BYTES`."""

    def __init__(self, file_bytes: int):
        self.file_bytes, self.inflated = file_bytes, 0

    def admit(self, path, member: str, info: zipfile.ZipInfo) -> None:
        """Raise :class:`ModelFileError` unless ``info``'s declared size fits (before reading)."""
        if info.compress_type == zipfile.ZIP_STORED:
            if info.file_size != info.compress_size or info.compress_size > self.file_bytes:
                raise file_error(path, f"its member {member!r} declares {info.file_size} bytes "
                                  f"({info.compress_size} stored) in a file of {self.file_bytes} "
                                  "bytes: truncated or forged.")
            return
        self.inflated += info.file_size
        if self.inflated > MAX_INFLATED_BYTES:
            raise file_error(path, f"its compressed member {member!r} declares {info.file_size} "
                              f"bytes ({info.compress_size} compressed): its compressed members "
                              f"would expand to {self.inflated} bytes, over the "
                              f"{MAX_INFLATED_BYTES} bytes jboost.io.reader.MAX_INFLATED_BYTES "
                              "allows (jboost.save writes members uncompressed; refused before "
                              "decompressing).")


def _member(path, archive, member: str, budget: _Budget) -> np.ndarray:
    """One ``.npy`` member, read within its declared sizes (:class:`_Budget`; its own ``.npy``
    header's shape within the member's size) before its data is allocated, then in chunks."""
    name = member[:-4] if member.endswith(".npy") else member
    try:
        info = archive.getinfo(member)
        budget.admit(path, member, info)
        with archive.open(info) as f:
            version = np.lib.format.read_magic(f)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = read_header(f, max_header_size=10000)
            if dtype.hasobject:
                raise file_error(path, f"array {name!r} is an object array, which would need "
                                  "pickle to read; model files never hold one (refused, nothing "
                                  "was executed).")
            if dtype.name not in DTYPES:
                raise file_error(path, f"array {name!r} is of dtype {dtype}; a model file holds "
                                  f"arrays of {', '.join(DTYPES)}.")
            n_bytes = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
            if n_bytes > info.file_size - f.tell():
                raise file_error(path, f"array {name!r} declares shape {shape} ({n_bytes} bytes) "
                                  f"but its member holds {info.file_size} bytes: truncated or "
                                  "forged.")
            buf = np.empty((n_bytes,), np.uint8)
            view, done = memoryview(buf), 0
            while done < n_bytes:
                got = f.readinto(view[done:done + CHUNK_BYTES])
                if not got:
                    raise EOFError(f"{n_bytes - done} of its {n_bytes} bytes are missing")
                done += got
            if f.read(1):
                raise ValueError(f"its member holds more than the {n_bytes} bytes of its shape")
    except ModelFileError:
        raise
    except Exception as e:  # noqa: BLE001 - truncated or corrupted member bytes
        raise file_error(path, f"array {name!r} cannot be read ({type(e).__name__}: {e}); the file is "
                          "truncated or corrupted.") from None
    a = buf.view(dtype)
    return a.reshape(shape[::-1]).transpose() if fortran else a.reshape(shape)


def _read_header(path, archive, member: str, budget: _Budget) -> Dict[str, Any]:
    raw = _member(path, archive, member, budget)
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise file_error(path, f"its header is a {raw.dtype} array of shape {raw.shape}, not JSON bytes.")
    try:
        header = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise file_error(path, f"its header is not valid JSON ({type(e).__name__}: {e}).") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise file_error(path, f"its header does not name the format {FORMAT!r}.")
    version = header.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise file_error(path, f"its format version {version!r} is not a positive integer.")
    if version > FORMAT_VERSION:
        raise ModelFileError(
            f"{os.fspath(path)} was written by a newer jboost ({header.get('jboost_version')!r}) in "
            f"model file format version {version}; this jboost reads format versions up to "
            f"{FORMAT_VERSION}: upgrade jboost to load it.")
    arrays = header.get("arrays")
    if not isinstance(arrays, dict) or not all(
            isinstance(v, dict) and isinstance(v.get("shape"), list) for v in arrays.values()):
        raise file_error(path, "its header has no valid 'arrays' table.")
    return header


def read_header(path) -> Dict[str, Any]:
    """The checked header of a model file (model type, versions, ``n_features``, ``task``,
    ``feature_names``, ``metadata``, ...), NumPy only."""
    return read(path)[0]


def _frame_in_order(X, names):
    """A pandas DataFrame's columns in the order of the file's ``feature_names`` (NumPy only);
    arrays, and a DataFrame for a model without names, are taken by position."""
    if not (type(X).__module__.startswith("pandas") and hasattr(X, "columns")) or names is None:
        return X
    have = [str(c) for c in X.columns]
    missing = [n for n in names if n not in have]
    extra = [n for n in have if n not in set(names)]
    if missing or extra:
        raise ValueError(f"X's columns do not match the model's features: missing {missing[:10]}, "
                         f"unexpected {extra[:10]} (the model was fitted on {list(names)[:10]}).")
    return X.iloc[:, [have.index(n) for n in names]].to_numpy(dtype=np.float32, na_value=np.nan)


def _clamp_subnormals(X) -> np.ndarray:
    """float32 ``X`` with every subnormal as the smallest normal number of its sign (a zero as +0),
    as jboost compares raw floats: jboost.data.binning.clamp_subnormals, repeated here (NumPy only)."""
    X = np.asarray(X, np.float32)
    bits = X.view(np.int32)
    tiny = np.float32(np.finfo(np.float32).tiny)
    return np.where((bits & 0x7F800000) == 0,
                    np.where((bits & 0x007FFFFF) != 0, np.where(bits < 0, -tiny, tiny), np.float32(0)), X)


def predict_numpy(path_or_read, X) -> np.ndarray:
    """Raw scores of a ``Booster`` of oblivious trees from a model file (a path or :func:`read`'s
    ``(header, arrays)``) with NumPy only: ``(n,)`` or ``(n, K)``, bitwise :func:`jboost.predict`'s
    on CPU (docs/io.md); batched Boosters get a leading batch axis.
    """
    header, arrays = read(path_or_read) if not isinstance(path_or_read, tuple) else path_or_read
    fam = header["structure"].get("fields", {}).get("trees", {})
    if header["model_type"] != "Booster" or fam.get("type") != "ObliviousTrees":
        raise ValueError(f"predict_numpy reads Boosters of oblivious trees; this file holds a "
                         f"{header['model_type']} (use jboost.load and jboost.predict).")
    if header["structure"].get("fields", {}).get("categorical", {}).get("kind", "none") != "none":
        raise ValueError("predict_numpy reads models of numeric features; this one was fitted with "
                         "categorical features, whose encoding needs jboost: use jboost.load and "
                         "jboost.predict.")
    X = np.asarray(_frame_in_order(X, header.get("feature_names")), np.float32)
    if X.ndim != 2 or X.shape[1] != header["n_features"]:
        raise ValueError(f"X must be (n, {header['n_features']}); got shape {X.shape}.")
    X = _clamp_subnormals(X)
    feats = arrays[".trees.features"]
    borders = _clamp_subnormals(arrays[".trees.borders"])
    miss = arrays[".trees.missing_right"]
    leaves = arrays[".trees.leaf_values"]
    baseline = arrays[".baseline"]
    batch = tuple(header["batch_shape"])
    m = int(np.prod(batch, dtype=np.int64))
    depth = feats.shape[-1]
    feats = feats.reshape((m, -1, depth))
    borders = borders.reshape((m, -1, depth))
    miss = miss.reshape((m, -1, depth))
    leaves = leaves.reshape((m, -1) + leaves.shape[-2:])
    baseline = baseline.reshape((m, -1))
    # A model with early stopping predicts with its rounds 0..best_round (all trees of a round).
    n_trees = np.full((m,), feats.shape[1], np.int64)
    if arrays.get(".best_round") is not None:
        per_round = arrays[".trees.features"].shape[-2]
        n_trees = (arrays[".best_round"].reshape(m).astype(np.int64) + 1) * per_round
    out = np.empty((m, X.shape[0], baseline.shape[-1]), np.float32)
    weights = (1 << np.arange(depth)).astype(np.int64)
    for i in range(m):
        acc = np.zeros((X.shape[0], baseline.shape[-1]), np.float32)
        for t in range(int(min(n_trees[i], feats.shape[1]))):
            cols = X[:, feats[i, t]]                                     # (n, D)
            right = np.where(np.isnan(cols), miss[i, t], cols > borders[i, t])
            acc = acc + leaves[i, t][right.astype(np.int64) @ weights]
        out[i] = baseline[i] + acc
    if arrays.get(".offset") is not None:  # a label offset (Booster.offset), added last as predict does
        out = out + arrays[".offset"].reshape((m, 1, -1))
    out = out.reshape(batch + out.shape[1:])
    loss = header["structure"].get("fields", {}).get("loss", {})
    keeps = loss.get("label_columns") is not None and not loss.get("batch", False)
    return out[..., 0] if out.shape[-1] == 1 and not keeps else out
