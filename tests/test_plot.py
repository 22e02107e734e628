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
from jboost.models import ensemble

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


@pytest.mark.slow
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


def _table(nodes, values):
    """One depth-wise node table (4 node slots, depth 3) from ``(feature, border, missing right,
    children, gain)`` rows; unused slots are null nodes."""
    from jboost.trees.depthwise import DepthwiseTrees
    nodes = list(nodes) + [(0, 0.0, False, (-1, -1), 0.0)] * (4 - len(nodes))
    f, b, mr, ch, g = zip(*nodes)
    levels = [0, 0, 0]
    return DepthwiseTrees(
        features=np.asarray(f, np.int32), thresholds=np.full(4, 14, np.int32),
        borders=np.asarray(b, np.float32), missing_right=np.asarray(mr, bool),
        children=np.asarray(ch, np.int32), leaf_values=np.asarray(values, np.float32).reshape(5, 1),
        gains=np.asarray(g, np.float32), level_counts=np.asarray(levels, np.int32))


def test_a_depthwise_tree_is_drawn_node_by_node(fitted):
    """Node tables with leaves at different depths: each splitting node's rule above its
    children, the used leaves as cells in root-to-leaf order (left first) labelled by leaf id."""
    import jax
    import jax.numpy as jnp
    from jboost import losses
    # (a) leaves at depths 1, 2, 3, 3; (b) the root's left child a node, its right a leaf;
    # (c) a root that does not split: one leaf, no rule.
    a = _table([(0, 0.0, False, (~0, 1), 2.0), (2, 0.3, True, (~1, 2), 1.0),
                (3, 0.8, True, (~2, ~3), 0.5)], [1.5, -2.0, 0.7, 3.1, 0.0])
    b = _table([(1, -0.25, False, (1, ~0), 3.0), (2, 0.5, False, (~1, ~2), 1.5)],
               [0.4, -1.1, 2.2, 0.0, 0.0])
    c = _table([], [0.9, 0.0, 0.0, 0.0, 0.0])
    trees = jax.tree_util.tree_map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs])[:, None], a, b, c)
    model = ensemble.as_booster(trees, jnp.zeros((4, 15), jnp.float32), jnp.zeros((1,), jnp.float32),
                               losses.squared_error())
    want = {0: ([0, 1, 2, 3], ["a <= 0", "c <= 0.3", "d <= 0.8"]),
            1: ([1, 2, 0], ["b <= -0.25", "c <= 0.5"]), 2: ([0], [])}
    for index, (order, rules) in want.items():
        ax = jboost.plot.tree(model, index, feature_names=list("abcd"))
        texts = ax.texts
        values = np.asarray(trees.leaf_values[index, 0, :, 0])
        assert [t.get_text() for t in texts[len(rules):]] == [f"{values[i]:.3g}" for i in order]
        assert [t.get_text().split("\n")[0] for t in texts[:len(rules)]] == rules
        assert [t.get_text() for t in ax.get_xticklabels()] == [str(i) for i in order]
        assert len(ax.patches) == len(order)
        xy = {t.get_text().split("\n")[0]: t.get_position() for t in texts[:len(rules)]}
        cells = [t.get_position() for t in texts[len(rules):]]
        assert [x for x, _ in cells] == list(range(len(order))) and all(y == 0 for _, y in cells)
        if index == 0:  # each rule midway above its children: the root over leaf 0 and node 1, ...
            assert xy["d <= 0.8"] == (2.5, 1) and xy["c <= 0.3"] == (1.75, 2) and xy["a <= 0"] == (0.875, 3)
        if index == 1:
            assert xy["c <= 0.5"] == (0.5, 1) and xy["b <= -0.25"] == (1.25, 2)
        _png(ax)
    # A fitted depth-wise model: one cell per used leaf, one rule per splitting node.
    X, y, _ = fitted
    free = jboost.fit(X[:200], y[:200], tree_family="depthwise", n_rounds=2, depth=3, n_bins=16)
    ax = jboost.plot.tree(free, 1)
    n_split = int(np.asarray(free.trees.level_counts[1, 0]).sum())
    assert len(ax.patches) == n_split + 1 and len(ax.texts) == 2 * n_split + 1
    _png(ax)
