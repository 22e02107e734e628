"""ECOCBoosters, the error-correcting-output-code model type, its decoders (L1, Hamming) and predict functions."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from jboost import checks
from jboost.losses import per_sample
from jboost.models import base, ensemble, metadata, structure
from jboost.trees import family, oblivious

DECODINGS = ("l1", "hamming")


def decode_hamming(raw, code) -> jax.Array:
    """Nearest codeword by Hamming distance between ``raw > 0`` and the codewords: ``(n,)``.

    Args:
      raw: ``(n, L)`` real scores of the bits (positive: bit 1).
      code: ``(K, L)`` 0/1. Ties go to the lowest class index.
    """
    bits = (jnp.asarray(raw) > 0).astype(jnp.int32)
    d = jnp.sum(bits[:, None, :] != jnp.asarray(code, jnp.int32)[None], axis=-1)
    return jnp.argmin(d, axis=-1)


def decode_l1(probs, code) -> jax.Array:
    """Nearest codeword in L1 distance ``sum_l |p_l - code_kl|`` of bit probabilities: ``(n,)``."""
    d = jnp.sum(jnp.abs(jnp.asarray(probs)[:, None, :] - jnp.asarray(code, jnp.float32)[None]), axis=-1)
    return jnp.argmin(d, axis=-1)


def decode(raw, code, decoding: str = "l1") -> jax.Array:
    """Class labels ``(n,)`` from the bits' log-odds ``raw (n, L)``: :func:`decode_l1` on their
    sigmoid probabilities (``"l1"``) or :func:`decode_hamming` on their signs (``"hamming"``)."""
    checks.check_choice(decoding, "decoding", DECODINGS)
    if decoding == "l1":
        return decode_l1(jax.nn.sigmoid(raw), code)
    return decode_hamming(raw, code)


@base.model_type("n_features", "n_rounds", "n_stages", "depth", "feature_names_in_", "classes_")
class ECOCBoosters(NamedTuple):
    """One boosted binary learner per code bit: a :class:`jboost.models.base.Model`.

    Attributes:
      trees: ObliviousTrees with leading axes ``(L, n_rounds, 1)``.
      borders: ``(F, n_bins - 1)``.
      baseline: ``(L, 1)`` each bit's constant log-odds.
      code: ``(K, L)`` the 0/1 code matrix.
      best_round: with early stopping, ``(L,)`` int32: each bit's round of its best validation
        score (predictions use each bit's rounds ``0..best_round``); ``None`` otherwise.
      classes: the mapped class labels (class ``k``, codeword ``code[k]``, is ``classes[k]``), as
        ``Booster.classes``, or ``None``.
      feature_names: the fit's feature names, as ``Booster.feature_names``, or ``None``.

    Its raw scores are the bits' log-odds ``(n, L)``, its classes the nearest codeword; it has
    no class probabilities (docs/models.md, "Model types").
    """

    trees: oblivious.ObliviousTrees
    borders: jax.Array
    baseline: jax.Array
    code: jax.Array
    best_round: Optional[jax.Array] = None
    classes: Optional[metadata.Classes] = None
    feature_names: Optional[metadata.FeatureNames] = None

    def best_trees(self) -> oblivious.ObliviousTrees:
        """The trees a prediction without ``n_rounds`` uses (:func:`jboost.models.base.used_rounds`)."""
        return base.used_rounds(self.trees, None, self.best_round, lead=1)

    @property
    def n_classes(self) -> int:
        return self.code.shape[-2]

    @property
    def n_bits(self) -> int:
        return self.code.shape[-1]

    @property
    def task(self) -> str:
        return "multiclass"

    @property
    def batch_shape(self) -> Tuple[int, ...]:
        return tuple(self.baseline.shape[:-2])

    def raw_scores(self, X, n_stages: Optional[int] = None) -> jax.Array:
        """``(n, L)`` the bits' log-odds, of the rounds a prediction uses."""
        trees = base.used_rounds(self.trees, n_stages, self.best_round, lead=1)
        raw = ensemble.batched_raw_scores(trees, self.baseline, jnp.asarray(X, jnp.float32), n_lead=1)
        return raw[:, :, 0].T                                                   # (L, n, 1) -> (n, L)

    #: Per-class importance: the first tree axis is the code bits.
    class_axis = "bits"

    def tree_sum(self, n_stages: Optional[int] = None):
        """``(trees, the bits' baselines (L,), None)``: the rounds :meth:`raw_scores` uses, bit
        ``l``'s leaf values in output ``l`` and exact zeros elsewhere."""
        trees = base.used_rounds(self.trees, n_stages, self.best_round, lead=1)  # (L, R, 1, ...)
        onehot = jnp.eye(self.n_bits, dtype=jnp.float32)[:, None, None, None, :]  # (L, 1, 1, 1, L)
        trees = trees._replace(leaf_values=trees.leaf_values * onehot)
        return family.flatten_trees(trees), self.baseline[:, 0], None

    def proba_from_raw(self, raw) -> jax.Array:
        raise ValueError("an ECOC ensemble has no calibrated class probabilities (its bits are "
                         "decoded to the nearest codeword): use jboost.predict_class for labels, or "
                         "jboost.predict for the bits' log-odds.")

    def classes_from_raw(self, raw) -> jax.Array:
        return decode(raw, self.code, "l1")

    def staged(self, X, fn: Callable, *args) -> Any:
        # The L bits as one L-output sum of trees (bit l's leaf values in output l, zeros elsewhere).
        n_bits = self.baseline.shape[-2]
        trees = ensemble.rounds_first(self.trees)                                # (R, L, ...)
        onehot = trees.leaf_values * jnp.eye(n_bits, dtype=jnp.float32)[:, None, :]
        bits = ensemble.as_booster(trees._replace(leaf_values=onehot), self.borders,
                                  self.baseline[:, 0], per_sample.binomial_deviance())
        return bits.staged(X, fn, *args)

    def check_structure(self, exact_borders: bool = True) -> None:
        """Raise ``ValueError`` naming the field unless the arrays fit each other: the code
        ``(*batch, K, L)`` of 0/1 bits with ``K >= 2`` classes, one boosted binary learner per bit
        (trees ``(*batch, L, n_rounds, 1)`` of one output, baselines ``(*batch, L, 1)``), splits
        on the borders' features and bins (:func:`jboost.models.structure.check_splits`),
        ``best_round`` per bit, ``K`` classes and the feature names."""
        if np.ndim(self.baseline) < 2 or np.ndim(self.code) < 2:
            raise structure.fail("code", f"has shape {np.shape(self.code)} and baseline "
                                         f"{np.shape(self.baseline)}; they should be (*batch, K, "
                                         "L) and (*batch, L, 1).")
        batch, n_bits = self.batch_shape, self.baseline.shape[-2]
        bits = batch + (n_bits,)
        structure.expect("baseline", self.baseline, bits + (1,), why=" (one log-odds per bit)")
        structure.expect("code", self.code, batch + (self.n_classes, n_bits), ("int32",),
                         f" ({n_bits} bits: the baseline's)")
        code = np.asarray(self.code)
        if self.n_classes < 2 or not np.isin(code, (0, 1)).all():
            raise structure.fail("code", f"holds {self.n_classes} codewords of values "
                                         f"{np.unique(code)[:5].tolist()}; it should hold K >= 2 "
                                         "codewords of 0/1 bits.")
        lead = structure.tree_lead(self.trees, bits, ("n_rounds", "trees_per_round"))
        if lead[-1] != 1:
            raise structure.fail("trees.features", f"has {lead[-1]} trees per round; each bit's "
                                                   "learner has 1.")
        structure.check_outputs(self.trees, 1, "each bit's learner")
        structure.check_borders(self.borders, [batch])
        structure.check_splits(self.trees, self.borders, exact_borders)
        structure.check_best_round(self.best_round, bits, lead[-2])
        structure.check_classes(self.classes, self.n_classes)
        structure.check_feature_names(self.feature_names, self.n_features)


def ecoc_bit_scores(model: ECOCBoosters, X) -> jax.Array:
    """Alias of :func:`jboost.predict`: the bits' raw log-odds ``(n, L)`` (``(n,)`` for one bit)."""
    return base.predict(model, X)


def ecoc_predict(model: ECOCBoosters, X, decoding: str = "l1") -> jax.Array:
    """Class labels ``(n,)``: the nearest codeword, by ``"l1"`` distance on the bits'
    probabilities (the default: an alias of :func:`jboost.predict_class`) or ``"hamming"``
    distance on their signs (:func:`decode`)."""
    checks.check_choice(decoding, "decoding", DECODINGS)
    if decoding == "l1":
        return base.predict_class(model, X)
    raw = base.predict(model, X)
    fn = lambda m, r: decode(r.reshape(r.shape[0], -1), m.code, decoding)
    for _ in model.batch_shape:
        fn = jax.vmap(fn)
    return metadata.labels_of(model, fn(model, raw))
