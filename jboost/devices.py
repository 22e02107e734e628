"""The devices= argument and device memory: the devices, their one-axis mesh, the memory limit, the labels-only lower bound (fit_bytes) and the MemoryError refusal (check_memory)."""

from __future__ import annotations

import os
from typing import Optional

import jax
import numpy as np

from jboost import checks


def devices_of(devices) -> tuple:
    """The devices named by ``devices``: ``None`` -> the default device; ``"all"``; a list; a Mesh."""
    if devices is None:
        return (jax.devices()[0],)
    if isinstance(devices, jax.sharding.Mesh):
        return tuple(devices.devices.flat)
    if isinstance(devices, str):
        if devices != "all":
            raise ValueError(f"devices={devices!r} must be None, 'all', a list of devices or a Mesh.")
        return tuple(jax.devices())
    out = tuple(devices)
    if not out:
        raise ValueError("devices is empty.")
    return out


def mesh_of(devices) -> Optional[jax.sharding.Mesh]:
    """A one-axis ``("rows",)`` mesh for data-parallel training, or ``None`` for one device."""
    if devices is None:
        return None
    if isinstance(devices, jax.sharding.Mesh):
        return devices
    return jax.sharding.Mesh(np.array(devices_of(devices)), ("rows",))


def check_memory_budget(memory_budget) -> Optional[int]:
    """``memory_budget`` as an int of bytes in ``[1, 2**62]``, or ``None``."""
    if memory_budget is None:
        return None
    return checks.check_int(memory_budget, "memory_budget", 1, 1 << 62)


def memory_limit(devices=None) -> int:
    """Bytes of memory of the first device used: the accelerator's limit, or for a CPU device (or
    a backend that does not report it) the host's memory available now (Linux ``MemAvailable``,
    at most the physical memory)."""
    device = devices_of(devices)[0]
    if device.platform != "cpu":
        try:
            return int(device.memory_stats()["bytes_limit"])
        except Exception:  # noqa: BLE001 - a backend without memory_stats
            pass
    try:
        total = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        total = 1 << 62
    try:  # Linux: what can be had now without swapping (other processes hold the rest)
        with open("/proc/meminfo") as f:
            available = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
        return min(total, available)
    except (OSError, StopIteration, ValueError, IndexError):
        return total


def fit_bytes(n_rows: int, n_features: int, depth: int, n_bins: int, n_outputs: int,
              dense_hessian: bool = False) -> int:
    """A lower bound (bytes) of one boosted model's fit, for when only the labels are known: one
    level's histograms, the per-row raw scores, gradients and hessians, and with
    ``dense_hessian`` the per-row ``K x K`` Jacobian of a K-output autodiff hessian."""
    n, k = int(n_rows), int(n_outputs)
    dense = n * k * k if dense_hessian and k > 1 else 0
    return 4 * (n_features * (1 << (depth - 1)) * n_bins * 2 * k + 3 * n * k + dense)


def check_memory(need: int, *, devices=None, cause: Optional[str] = None,
                 detail: str = "", what: str = "this fit") -> None:
    """Raise ``MemoryError`` before compiling when ``need`` bytes
    (:func:`jboost.engine.memory.boosting_bytes`, :func:`fit_bytes`) exceed the memory of the
    device (:func:`memory_limit`); the message names ``cause`` (e.g. the number of classes taken
    from the labels) and the settings (``detail``)."""
    have = memory_limit(devices)
    if need > have:
        why = f" {cause};" if cause else ""
        raise MemoryError(f"{what} needs about {need / 2**30:.3g} GiB but the device has "
                          f"{have / 2**30:.3g} GiB:{why} {detail}.")
