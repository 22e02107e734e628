"""Per-process memory of a multi-process fit (``jboost.fit(..., rows="local")``) against the process count.

    python benchmarks/distributed_memory.py                       # 600k x 20, 1, 2 and 3 processes
    python benchmarks/distributed_memory.py --rows 300000 --processes 1 2
    python benchmarks/distributed_memory.py --json out.json
    python benchmarks/distributed_memory.py --smoke     # CI's check: 20k rows, 1 and 2 processes

The same table (``--rows`` x ``--features`` float32, made in seeded chunks of 10,000 rows so that
a process makes only its own rows) is fitted by 1, 2 and 3 CPU processes on localhost
(``jax.distributed`` with gloo collectives, one CPU device each), every process holding only its
share of the rows: ``jboost.fit(X_local, y_local, rows="local")`` (squared error, ``--depth``,
``--rounds``). Each process reports its peak resident memory (``resource.getrusage``
``ru_maxrss``) after the fit, and its peak before making its rows (Python, JAX and jboost
imported, the runtime initialised): the difference is what the data and the fit cost it.

Reported per process count: rows per process, the largest peak RSS over the processes, the
largest peak above the import baseline, and the fit's wall time (process 0; it includes
compiling the program, and the processes share this machine's cores).

Measured on a shared 2-core machine (2026-11-23, depth 4, 10 rounds; peak MB / above import MB;
the last round's training loss: 0.199111 for every count at 600k rows, 0.198488 / 0.198489 /
0.198489 at 2.4M, float rounding of the summed histograms):

    rows x 20    1 process          2 processes       3 processes
    600,000      509 / 328          479 / 299         450 / 269
    2,400,000    921 / 740          677 / 496         597 / 416
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

CHUNK = 10_000


def make_rows(lo: int, hi: int, n_features: int):
    """Rows ``lo .. hi - 1`` of the table (``lo``, ``hi`` multiples of :data:`CHUNK`)."""
    import numpy as np

    X, y = [], []
    for c in range(lo // CHUNK, hi // CHUNK):
        rng = np.random.default_rng(c)
        x = rng.normal(size=(CHUNK, n_features)).astype(np.float32)
        X.append(x)
        y.append((x[:, 0] + 0.5 * x[:, 1] ** 2 + 0.1 * rng.normal(size=CHUNK)).astype(np.float32))
    return np.concatenate(X), np.concatenate(y)


def worker(pid: int, n: int, port: str, args) -> dict:
    import resource

    import jax
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=n, process_id=pid)
    import numpy as np

    import jboost

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    chunks = args.rows // CHUNK
    lo, hi = (chunks * pid // n) * CHUNK, (chunks * (pid + 1) // n) * CHUNK
    X, y = make_rows(lo, hi, args.features)
    t0 = time.perf_counter()
    model = jboost.fit(X, y, n_rounds=args.rounds, depth=args.depth, rows="local")
    jax.block_until_ready(model.trees)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"process": pid, "rows": hi - lo, "peak_mb": peak, "baseline_mb": base,
            "fit_s": seconds, "train_loss": float(np.asarray(model.train_loss)[-1])}


def run(n: int, args) -> list:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = str(s.getsockname()[1])
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    cmd = [sys.executable, os.path.abspath(__file__), "--rows", str(args.rows), "--features",
           str(args.features), "--rounds", str(args.rounds), "--depth", str(args.depth)]
    procs = [subprocess.Popen(cmd + ["--worker", str(p), str(n), port], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for p in range(n)]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=1800)
        lines = [l for l in stdout.splitlines() if l.startswith("RESULT ")]
        if p.returncode != 0 or not lines:
            raise RuntimeError(stderr[-3000:])
        out.append(json.loads(lines[0][len("RESULT "):]))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=600_000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--json", default=None)
    parser.add_argument("--worker", nargs=3, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--smoke", action="store_true",
                        help="the smallest size (CI's check): 20,000 rows, depth 3, 2 rounds, 1 and 2 "
                             "processes")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.depth, args.rounds, args.processes = 20_000, 3, 2, [1, 2]
    if args.rows % CHUNK:
        parser.error(f"--rows must be a multiple of {CHUNK}")
    if args.worker is not None:
        pid, n, port = args.worker
        print("RESULT " + json.dumps(worker(int(pid), int(n), port, args)), flush=True)
        return
    print(f"{args.rows} rows x {args.features} features, depth {args.depth}, {args.rounds} rounds")
    print(f"{'processes':>9} {'rows/process':>12} {'peak MB':>8} {'above import MB':>15} "
          f"{'fit s':>6} {'train loss':>10}")
    table = []
    for n in args.processes:
        res = run(n, args)
        row = {"processes": n, "rows_per_process": max(r["rows"] for r in res),
               "peak_mb": max(r["peak_mb"] for r in res),
               "above_import_mb": max(r["peak_mb"] - r["baseline_mb"] for r in res),
               "fit_s": res[0]["fit_s"], "train_loss": res[0]["train_loss"], "per_process": res}
        table.append(row)
        print(f"{n:>9} {row['rows_per_process']:>12} {row['peak_mb']:>8.0f} "
              f"{row['above_import_mb']:>15.0f} {row['fit_s']:>6.1f} {row['train_loss']:>10.6g}",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)


if __name__ == "__main__":
    main()
