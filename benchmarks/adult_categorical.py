"""Categorical features, side by side: adult (UCI census income), categorical columns passed natively.

    pip install -e ".[bench]"
    python benchmarks/adult_categorical.py                 # depth 6, 1000 rounds, rate 0.05
    python benchmarks/adult_categorical.py --rounds 200    # shorter
    python benchmarks/adult_categorical.py --smoke         # CI's peer check: 10 rounds, seconds
    python benchmarks/adult_categorical.py --libs jboost catboost --json out.json

Data: ``adult_train.csv.gz`` (32,561 rows) and ``adult_test.csv.gz`` (16,281 rows) as given, from
``--data-dir`` (default: ``$JBOOST_DATA_DIR``, else ``../shared/data``: jboost.datasets'
search). The eight string columns (workclass, education, marital-status, occupation,
relationship, race, sex, native-country; 2 to 42 categories, missing values in three) are
pandas ``category`` columns with NaN for missing, the six integer columns numeric.

Every library gets the same depth, rounds and learning rate, trees of at most ``2^depth``
leaves, and its defaults otherwise, and the categorical columns natively:

* jboost: ``jboost.fit(X, y, "binomial_deviance")`` on the DataFrame (category columns inferred:
  one-hot up to ``one_hot_max_size=16`` categories, ordered target statistics above);
* CatBoost: ``cat_features`` (missing as the string ``"<missing>"``: CatBoost refuses NaN there);
* LightGBM: ``categorical_feature`` (category dtype), ``max_depth``, ``num_leaves = 2^depth``;
* XGBoost: ``enable_categorical=True``, ``tree_method="hist"``, ``max_depth``;
* scikit-learn: ``HistGradientBoostingClassifier(categorical_features="from_dtype")``,
  ``max_depth``, ``max_leaf_nodes = 2^depth``, no early stopping.

Reported: test log loss, test error, fit wall time (jboost: its second fit, the compiled
program; its first fit with compilation in ``cold s``), and each library's log loss and time
over jboost's. All in this process, one after the other, 2 threads each where settable.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

LIBS = ("jboost", "catboost", "lightgbm", "xgboost", "sklearn")
PUBLISHED = {"catboost": 0.2697, "lightgbm": 0.2760, "xgboost": 0.2754}  # CatBoost's tuned table


def load_adult_frames(data_dir=None):
    """``(X, y, X_test, y_test)``: adult's train and test files as pandas DataFrames, string
    columns as ``category`` (the training file's categories) with NaN for missing."""
    import pandas as pd

    from jboost import datasets

    def read(name):
        df = pd.read_csv(datasets.data_dir(data_dir) / name, keep_default_na=False, na_values=[""])
        y = df.pop("target").to_numpy(np.float32)
        return df, y

    for f in ("adult_train.csv.gz", "adult_test.csv.gz"):
        datasets._file(f, data_dir)  # the loaders' FileNotFoundError, saying where to put it
    X, y = read("adult_train.csv.gz")
    Xt, yt = read("adult_test.csv.gz")
    for c in X.columns:
        # Strings: pandas 2 reads them as object, pandas 3 as its str dtype (not == object).
        if not pd.api.types.is_numeric_dtype(X[c].dtype):
            cats = sorted(X[c].dropna().unique())
            X[c] = pd.Categorical(X[c], categories=cats)
            Xt[c] = pd.Categorical(Xt[c], categories=cats)  # unseen test values: NaN
    return X, y, Xt, yt


def log_loss(p, y) -> float:
    p = np.clip(np.asarray(p, np.float64), 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def fit_predict(lib: str, X, y, Xt, *, depth: int, rounds: int, lr: float, seed: int = 0):
    """``(test probabilities of class 1, fit seconds, cold seconds or None)`` for one library."""
    import pandas as pd

    cats = [c for c in X.columns if isinstance(X[c].dtype, pd.CategoricalDtype)]
    leaves = 2 ** depth
    if lib == "jboost":
        import jax

        import jboost

        def run():
            return jax.block_until_ready(jboost.fit(X, y, "binomial_deviance", n_rounds=rounds,
                                                    depth=depth, learning_rate=lr, key=seed))
        _, cold = _timed(run)
        model, warm = _timed(run)
        return np.asarray(jboost.predict_proba(model, Xt))[:, 1], warm, cold
    if lib == "catboost":
        import catboost

        def strings(df):
            out = df.copy()
            for c in cats:
                out[c] = out[c].astype(object).where(out[c].notna(), "<missing>")
            return out
        model = catboost.CatBoostClassifier(iterations=rounds, depth=depth, learning_rate=lr,
                                            random_seed=seed, thread_count=2, verbose=0,
                                            allow_writing_files=False)
        _, t = _timed(lambda: model.fit(strings(X), y, cat_features=cats))
        return model.predict_proba(strings(Xt))[:, 1], t, None
    if lib == "lightgbm":
        import lightgbm

        model = lightgbm.LGBMClassifier(n_estimators=rounds, max_depth=depth, num_leaves=leaves,
                                        learning_rate=lr, random_state=seed, n_jobs=2, verbose=-1)
        _, t = _timed(lambda: model.fit(X, y, categorical_feature=cats))
        return model.predict_proba(Xt)[:, 1], t, None
    if lib == "xgboost":
        import xgboost

        model = xgboost.XGBClassifier(n_estimators=rounds, max_depth=depth, learning_rate=lr,
                                      tree_method="hist", enable_categorical=True, random_state=seed,
                                      n_jobs=2)
        _, t = _timed(lambda: model.fit(X, y))
        return model.predict_proba(Xt)[:, 1], t, None
    if lib == "sklearn":
        from sklearn.ensemble import HistGradientBoostingClassifier

        model = HistGradientBoostingClassifier(max_iter=rounds, max_depth=depth, max_leaf_nodes=leaves,
                                               learning_rate=lr, categorical_features="from_dtype",
                                               early_stopping=False, random_state=seed)
        _, t = _timed(lambda: model.fit(X, y))
        return model.predict_proba(Xt)[:, 1], t, None
    raise ValueError(f"unknown library {lib!r}; one of {LIBS}")


def run(libs=LIBS, *, depth: int = 6, rounds: int = 1000, lr: float = 0.05, data_dir=None,
        seed: int = 0, log=print):
    """Fit every library in ``libs`` on adult's training file; returns the rows of the table
    (``library``, ``log_loss``, ``error``, ``fit_s``, ``cold_s``, ratios to jboost)."""
    X, y, Xt, yt = load_adult_frames(data_dir)
    rows = []
    for lib in libs:
        try:
            p, t, cold = fit_predict(lib, X, y, Xt, depth=depth, rounds=rounds, lr=lr, seed=seed)
        except ImportError as e:
            log(f"{lib}: not installed ({e}); skipped")
            continue
        rows.append({"library": lib, "log_loss": log_loss(p, yt),
                     "error": float(np.mean((p > 0.5) != (yt > 0.5))), "fit_s": t, "cold_s": cold})
        log(f"{lib}: test log loss {rows[-1]['log_loss']:.5f}, fit {t:.1f} s", flush=True)
    ref = next((r for r in rows if r["library"] == "jboost"), None)
    for r in rows:
        r["log_loss_over_jboost"] = None if ref is None else r["log_loss"] / ref["log_loss"]
        r["time_over_jboost"] = None if ref is None else r["fit_s"] / ref["fit_s"]
    return rows


def table(rows, header: str = "") -> str:
    lines = [header] if header else []
    lines.append(f"{'library':<10} {'log loss':>9} {'error':>7} {'fit s':>8} {'cold s':>7} "
                 f"{'LL/jboost':>9} {'time/jboost':>11} {'published':>9}")
    for r in rows:
        ratio = lambda v: "-" if v is None else f"{v:.4f}"  # noqa: E731
        lines.append(f"{r['library']:<10} {r['log_loss']:>9.5f} {r['error']:>7.4f} {r['fit_s']:>8.2f} "
                     f"{'-' if r['cold_s'] is None else format(r['cold_s'], '.2f'):>7} "
                     f"{ratio(r['log_loss_over_jboost']):>9} {ratio(r['time_over_jboost']):>11} "
                     f"{PUBLISHED.get(r['library'], float('nan')):>9.4f}")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--libs", nargs="+", default=list(LIBS), choices=LIBS)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--rounds", type=int, default=1000)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--json", default=None)
    p.add_argument("--smoke", action="store_true",
                   help="the smallest size (CI's peer check): 10 rounds at learning rate 0.3, every "
                        "library of --libs")
    a = p.parse_args(argv)
    if a.smoke:
        a.rounds, a.lr = 10, 0.3
    rows = run(a.libs, depth=a.depth, rounds=a.rounds, lr=a.lr, data_dir=a.data_dir, seed=a.seed)
    load = os.getloadavg()
    print(table(rows, f"adult, depth {a.depth}, {a.rounds} rounds, learning rate {a.lr}; "
                      f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "depth": a.depth, "rounds": a.rounds, "lr": a.lr,
                       "loadavg": load}, f, indent=1)


if __name__ == "__main__":
    main()
