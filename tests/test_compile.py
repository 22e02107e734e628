"""jboost's programs are compiled through jboost._compile.jit: on the CPU, top-level programs
get XLA compiler options (the classic emitters, which compile about twice as fast), nested ones
(inside the user's jit, vmap or eval_shape) none, and the user's XLA_FLAGS win."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import jboost
from jboost import _compile
from jboost.engine import calls


def _program(x, scale):
    return jnp.exp(x) * scale + jnp.log1p(x * x)


def test_top_level_programs_get_the_options_and_nested_ones_run_as_part_of_their_caller():
    f = _compile.jit(_program)
    x = jnp.linspace(0.0, 2.0, 7)
    assert jax.default_backend() == "cpu"
    assert f._pick() is f._cpu and f._cpu is not None  # the CPU program, with the options
    assert f._options == {"xla_cpu_use_fusion_emitters": False}
    direct = f(x, 2.0)
    # JAX refuses compiler options on a nested jit: inside the user's transformations jboost's
    # programs are plain jits, part of the enclosing program.
    nested = jax.jit(lambda x: f(x, 2.0))(x)
    mapped = jax.vmap(lambda s: f(x, s))(jnp.array([1.0, 2.0]))
    shape = jax.eval_shape(f, x, 2.0)
    np.testing.assert_allclose(np.asarray(nested), np.asarray(direct), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(mapped[1]), np.asarray(direct), rtol=1e-6)
    assert shape.shape == (7,)
    assert f.__wrapped__ is _program and f.lower(x, 2.0).compile() is not None
    # static arguments and the decorator form
    g = _compile.jit(static_argnames=("n",))(lambda x, n: x * n)
    assert float(g(jnp.float32(2.0), n=3)) == 6.0 and g._cache_size() == 1


def test_the_users_xla_flags_win(monkeypatch):
    f = _compile.jit(_program)
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=true")
    assert _compile.cpu_options() == {}
    assert f._pick() is f._plain  # XLA's own setting, as the user asked
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=1")
    assert _compile.cpu_options() == _compile.CPU_COMPILER_OPTIONS
    assert f._pick() is f._cpu


def test_a_fit_and_a_vmapped_fit_run_through_the_compiled_programs():
    """jboost.fit (its rounds' program a _compile.jit) and the same fit under the user's vmap
    (the program nested, without options) give the same model to float rounding."""
    assert isinstance(calls.boost_rounds, _compile.Jitted)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 4)).astype(np.float32)
    y = (X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=200) > 0).astype(np.float32)
    fit = lambda lr: jboost.fit(X, y, "binomial_deviance", n_rounds=6, depth=3, learning_rate=lr)
    one = fit(0.3)
    both = jax.vmap(fit)(jnp.array([0.3, 0.5]))
    np.testing.assert_array_equal(np.asarray(both.trees.features[0]), np.asarray(one.trees.features))
    np.testing.assert_allclose(np.asarray(both.trees.leaf_values[0]), np.asarray(one.trees.leaf_values),
                               rtol=1e-5, atol=1e-7)
