"""jboost.plot (issue 18 part 4): every plot renders to PNG headlessly, with the numbers of
jboost.inspect and of the model."""

from __future__ import annotations

import io

import numpy as np
import pytest

import jboost
from jboost import inspect as ji

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

KW = dict(n_rounds=6, depth=3, n_bins=16, learning_rate=0.5)


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4)).astype(np.float32)
    X[::9, 2] = np.nan
    y = (X[:, 0] + X[:, 1] * X[:, 3] + 0.1 * rng.standard_normal(300)).astype(np.float32)
    model = jboost.fit(X[:200], y[:200], eval_set=(X[200:], y[200:]), early_stopping_rounds=3, **KW)
    return X, y, model


def _png(ax):
    buf = io.BytesIO()
    ax.figure.savefig(buf, format="png")
    plt.close(ax.figure)
    data = buf.getvalue()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000
    return data


def test_importance_bars_are_the_relative_importance(fitted):
    _, _, model = fitted
    ax = jboost.plot.importance(model, feature_names=["a", "b", "c", "d"])
    widths = sorted(p.get_width() for p in ax.patches)
    np.testing.assert_allclose(widths, sorted(np.asarray(ji.importance(model))), rtol=1e-6)
    assert ax.get_yticklabels()[-1].get_text() == "abcd"[int(np.argmax(np.asarray(ji.importance(model))))]
    _png(ax)
    top2 = jboost.plot.importance(model, max_features=2)
    np.testing.assert_allclose(sorted(p.get_width() for p in top2.patches),
                               sorted(np.asarray(ji.importance(model)))[-2:], rtol=1e-6)
    plt.close(top2.figure)


def test_partial_dependence_lines_contours_and_ice(fitted):
    X, _, model = fitted
    ax = jboost.plot.partial_dependence(model, 0, X, grid_resolution=8)
    pdp = ji.partial_dependence(model, 0, X, grid_resolution=8)
    line = ax.get_lines()[0]
    np.testing.assert_allclose(line.get_ydata(), np.asarray(pdp.values), rtol=1e-6)
    _png(ax)
    ax = jboost.plot.partial_dependence(model, 0, X[:50], ice=True, grid_resolution=5)
    assert len(ax.get_lines()) == 50 + 1 + 1  # the rows' curves, the mean, the deciles' rug
    _png(ax)
    _png(jboost.plot.partial_dependence(model, (1, 3), X, grid_resolution=6))


def test_shap_plots_learning_curves_and_a_tree(fitted):
    X, _, model = fitted
    ax = jboost.plot.shap_summary(model, X[:40], data=X)
    assert sum(len(c.get_offsets()) for c in ax.collections) == 40 * 4
    _png(ax)
    ax = jboost.plot.shap_dependence(model, 0, X[:40], data=X)
    np.testing.assert_allclose(ax.collections[0].get_offsets()[:, 1],
                               np.asarray(ji.shap_values(model, X[:40], data=X).values)[:, 0], rtol=1e-6)
    _png(ax)
    ax = jboost.plot.learning_curves(model)
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), np.asarray(model.train_loss))
    assert f"best round ({int(model.best_round) + 1})" in [t.get_text() for t in ax.get_legend().get_texts()]
    _png(ax)
    ax = jboost.plot.tree(model, 1)
    texts = [t.get_text() for t in ax.texts]
    leaves = np.asarray(model.trees.leaf_values[1, 0, :, 0])
    assert [f"{v:.3g}" for v in leaves] == texts[-8:]
    assert texts[0].startswith(f"level 0: x{int(model.trees.features[1, 0, 0])} <= ")
    _png(ax)
    with pytest.raises(ValueError, match=r"index=99 must be in \[0, "):
        jboost.plot.tree(model, 99)
