"""Categorical features on adult (issue 17): jboost against CatBoost, LightGBM, XGBoost and
scikit-learn's HGB, the categorical columns passed natively to each.

Runs ``benchmarks/adult_categorical.py``: adult's train and test files as given, depth 6, the
same rounds and learning rate for every library (1000 rounds at 0.05 by default; ``--smoke``:
100 rounds at 0.3, jboost and CatBoost only), each library's defaults otherwise; jboost infers
the categorical columns from the DataFrame's ``category`` dtype (one-hot up to 16 categories,
CatBoost's ordered target statistics above: native-country). Prints test log loss, error, fit
time and the ratios to jboost; the published numbers are CatBoost's tuned table (Prokhorenkova
et al. 2018: CatBoost 0.2697, LightGBM 0.2760, XGBoost 0.2754 after tuning each), beside the
defaults measured here.

Command: ``python -m experiments.run adult_categorical --data-dir ../shared/data`` (the five
libraries' 1000-round fits take a few minutes on 2 shared CPU cores; CatBoost's is the longest).
A library that is not installed is skipped with a line saying so.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "adult_categorical.py"
PAPER = ("Prokhorenkova et al. 2018, CatBoost: unbiased boosting with categorical features "
         "(NeurIPS), table of tuned test log loss, Adult")


def _bench():
    spec = importlib.util.spec_from_file_location("adult_categorical_bench", _BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def get_config(smoke: bool = False) -> dict:
    return {
        "description": "adult with categorical columns: jboost vs CatBoost, LightGBM, XGBoost, HGB",
        "seed": 0,
        "depth": 6,
        "n_rounds": 100 if smoke else 1000,
        "learning_rate": 0.3 if smoke else 0.05,
        "libs": ["jboost", "catboost"] if smoke else ["jboost", "catboost", "lightgbm", "xgboost", "sklearn"],
    }


def run(config: dict, ctx) -> dict:
    bench = _bench()
    rows = bench.run(config["libs"], depth=config["depth"], rounds=config["n_rounds"],
                     lr=config["learning_rate"], data_dir=ctx.data_dir, seed=config["seed"])
    load = os.getloadavg()
    print(bench.table(rows, f"adult, depth {config['depth']}, {config['n_rounds']} rounds, "
                            f"learning rate {config['learning_rate']}; load average "
                            f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"))
    settings = (f"gradient boosting, log loss, depth {config['depth']}, {config['n_rounds']} rounds, "
                f"learning rate {config['learning_rate']}, categorical columns native, defaults otherwise")
    table = [{"quantity": "test log loss (published: the library tuned by its authors' protocol)",
              "algorithm": f"{r['library']}: {settings}", "ours": r["log_loss"],
              "published": bench.PUBLISHED.get(r["library"]),
              "source": PAPER if r["library"] in bench.PUBLISHED else None} for r in rows]
    table += [{"quantity": "fit seconds", "algorithm": f"{r['library']}: {settings}", "ours": r["fit_s"],
               "published": None, "source": None} for r in rows]
    return {"table": table, "rows": rows, "loadavg": list(load)}
