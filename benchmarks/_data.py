"""The data directory the benchmark scripts read real data sets from: ``$JBOOST_DATA_DIR``, else
``../shared/data`` beside this checkout (the layout of the project's machines)."""

from __future__ import annotations

import os

from jboost import datasets

HERE = os.path.dirname(os.path.abspath(__file__))


def default_data_dir() -> str:
    """``$JBOOST_DATA_DIR`` (:data:`jboost.datasets.ENV_VAR`), else ``../shared/data``."""
    return os.environ.get(datasets.ENV_VAR) or os.path.join(HERE, "..", "..", "shared", "data")
