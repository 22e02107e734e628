"""Multi-class AdaBoost reproduced: SAMME, SAMME.R and AdaBoost.MH by the protocol of Zhu, Rosset,
Zou and Hastie ("Multi-class AdaBoost", preprint of 12 January 2006), beside its published Tables 1
and 3; then SAMME, SAMME.R, K-class LogitBoost and multinomial gradient boosting on oblivious trees.

**The paper's protocol** (quoted in ``../shared/published/samme_2006.md``): classification trees
"built using a greedy, top-down recursive partitioning strategy", all trees of a method of one
size "chosen via five-fold cross-validation"; a single CART tree sized the same way; 200, 400 and
600 iterations; no shrinkage (learning rate 1). Here:

* the weak learner is a Gini tree whose splits maximise the weighted Gini decrease (SAMME's
  plurality tree: least squares of the one-hot labels, hessian ``w / K``, so its Newton gain is
  ``K`` times the Gini decrease) and whose leaves vote their weighted plurality class. Its size is
  chosen by five-fold CV on the training rows from a grid (the CV error after ``cv_rounds``
  rounds; ties: the smaller size), separately per method; the test rows are read only after the
  choice. Two tree families:

  - **letter**: loss-guided trees (``tree_family="lossguide"``, best first, like CART's count of
    terminal nodes) of ``max_leaves`` J, the paper's J, chosen from ``leaves`` for SAMME, SAMME.R
    and AdaBoost.MH and from ``cart_leaves`` for CART (``n_bins=16`` splits letter's 16-valued
    features exactly);
  - waveform, vowel and segmentation: depth-wise trees (``tree_family="depthwise"``) of a depth
    chosen from ``depths`` (at most ``2**depth`` leaves); vowel's CART is loss-guided
    (``cart_leaves``), as the paper's terminal-node count;

* vowel's training rows are 8 speakers of 66 rows each, in order (checked: the distance between
  a vowel's consecutive repetitions jumps 5.5-fold at every 66th row), and its test rows are 7
  other speakers: its folds hold whole speakers (speaker ``s`` in fold ``s mod 5``), so that CV
  scores a size on voices it has not heard, as the test does. Its grid reaches depth 8 and its
  CV runs 200 rounds. Beside the choice, an investigation (rows marked so): the depth that CV on
  stratified row folds would choose, and the test error at every depth of the grid (read after
  the choice, choosing nothing); letter's investigation rows are SAMME's test errors at every J
  of its grid (``size_trend``);
* CART is the first SAMME tree: one Gini tree of CV-chosen size, each leaf voting its plurality
  class;
* AdaBoost.MH (Schapire and Singer 1999; the paper's other comparator) is real AdaBoost.MH written
  for this experiment as one round function on jboost's boosting scaffold
  (``experiments/configs/_adaboost_mh.py``; ``jboost.algorithms`` has none): weights on (row,
  class) pairs, one tree per round whose splits minimise Schapire and Singer's ``Z`` (a custom
  ``SplitCriterion``), leaves ``c_jl = 1/2 ln((W+_jl + eps) / (W-_jl + eps))`` with
  ``eps = 1/(nK)``, no shrinkage, the class ``argmax_l f_l``. The paper does not say which
  AdaBoost.MH variant or tree it ran. ``jboost.fit`` with that exponential loss (summed over
  the K one-vs-all codings) as a custom loss cannot run it: its Newton leaves are Gentle
  AdaBoost.MH's, not these confidences, and on vowel (J = 16, learning rate 1) its training loss
  leaves float32's range at round 212 (the fit stops with a non-finite loss); the round function
  keeps the weights normalised in log space.
* data: letter, vowel and segmentation with their given splits; waveform drawn by
  :func:`jboost.datasets.waveform` (Breiman et al.'s generator, Table 1's setting: 300 training
  and 5,000 test rows, ten draws, mean and standard error over the draws; the size is chosen by
  CV on the first draw's training rows and used for all ten);
* peers in the same run: scikit-learn's ``AdaBoostClassifier`` (SAMME, learning rate 1) on CART
  trees of the size our CV chose for SAMME (``max_depth``, or ``max_leaf_nodes`` for loss-guided
  sizes: scikit-learn's best-first tree), and ``DecisionTreeClassifier`` of CART's size.
  scikit-learn >= 1.6 has no SAMME.R.

Friedman, Hastie and Tibshirani (2000) tables are not available to this project
(``../shared/published/samme_2006.md``), so no column of theirs is filled.

**Cost** (the 2-core machine). Letter dominates. A loss-guided tree's cost grows faster than its
leaves on letter (26 classes). Timed on a machine shared with other jobs (load 5 to 14, so 2-4 times
a quiet machine's): one 600-round fit on the 16,000 training rows took 47 s at J = 64, 183 s at J =
128 and 584 s at J = 256 (SAMME; SAMME.R 1,851 s and AdaBoost.MH 1,685 s at J = 256, all three at
once), one CV fold of 200 rounds on 12,800 rows 80-165 s at J = 128 and 154-626 s at J = 256, and
one CART tree's 5-fold CV 38 s at J = 512 and 298 s at J = 1,024. On a less loaded moment (load 0.5
to 5): 0.2 s per round at J = 128, 0.7 s at J = 256, 2.4 s at J = 512 (SAMME, 16,000 rows). So
letter's CV runs 200 rounds (not 600) over J in ``leaves`` = 128, 256 for each method; J = 512
(``trend_leaves``) is fitted once, for SAMME, as an investigation row (about 20 minutes on a quiet
machine; 81 minutes on the loaded one); CART's grid stops at J = 1,024. The full run of 2026-12-04
(commit ``8220bf1``, load about 1.5) took 5,441 s: letter about 2,800 s (SAMME, SAMME.R and
AdaBoost.MH 514-670 s each, the J = 512 row 725 s), vowel about 2,100 s. The earlier depth-wise
letter protocol (depths 6, 8, 10; CV chose 10: SAMME 3.35% after 600 rounds) is no longer run; a
depth-wise fit of depth 12 at 26 classes held 11.8 GB. The rows marked "the trend with tree size"
show scikit-learn's SAMME on deeper trees, outside the CV choice.

**Measured while building this** (scratch runs, not a run's table; test errors read after the CV
choice): letter SAMME's 5-fold CV error after 200 rounds 5.51% at J = 128 and 4.01% at J = 256 (CV
chooses 256); test error after 200 / 400 / 600 rounds 7.68 / 6.73 / 6.50% at J = 64, 5.50 / 4.63 /
4.55% at 128, 3.78 / 3.70 / 3.53% at 256, 3.03 / 2.95 / 3.03% at 512 (published 2.3%, SE 0.2);
SAMME.R at J = 256 3.73 / 3.53 / 3.58%; AdaBoost.MH at J = 256 2.50 / 2.45 / 2.53% (published 2.6%,
SE 0.3). Letter CART: CV errors 22.7 / 17.1 / 14.4% at J = 256 / 512 / 1,024 (CV chooses 1,024),
test error 14.55% (published 13.5%, SE 0.5). Vowel CART (speaker folds): CV chooses J = 64 of
8-128, test 58.2% (published 53.0%, SE 2.3; at J = 32, not chosen, 55.2%; stratified row folds
choose 128, also 58.2%; scikit-learn's best-first tree of 64 leaves 56.7%). AdaBoost.MH by this
protocol (depth-wise trees): vowel depth 5, 46.1 / 46.8 / 45.9% (published 52.8 / 51.5 / 51.5%,
SE 2.3: ours is lower, outside the band); segmentation depth 3, 4.14 / 4.19 / 4.05% (4.5%, SE 0.5);
waveform depth 4, 17.60 / 17.40 / 17.34% (17.0%, SE 0.6).

**Oblivious trees** (the second part, the rows of earlier runs): SAMME and SAMME.R (learning rate
1), K-class LogitBoost (FHT Algorithm 6, learning rate 1, ``z`` clipped at 4) and multinomial
deviance gradient boosting (Newton trees with vector leaves, learning rate 0.1), oblivious trees
of a fixed depth per data set, test error after the last round.

Run::

    python -m experiments.run multiclass_table          # full (letter dominates)
    python -m experiments.run multiclass_table --smoke  # < 90 s
"""

from __future__ import annotations

import time

import numpy as np

import jboost
from jboost import algorithms as A
from experiments.configs import _adaboost_mh, multiclass_error, staged_metric

SOURCE = "Zhu, Rosset, Zou, Hastie, Multi-class AdaBoost, preprint of 12 January 2006, Table {}"
#: Published test errors in % with their standard errors, at 200, 400, 600 iterations (CART: one
#: number), from ../shared/published/samme_2006.md (Table 1: waveform; Table 3: the others).
PUBLISHED = {
    "waveform": dict(table=1, CART=[(28.4, 1.8)], MH=[(17.1, 0.6), (17.0, 0.5), (17.0, 0.6)],
                     SAMME=[(16.7, 0.8), (16.6, 0.7), (16.6, 0.6)],
                     SAMME_R=[(16.8, 0.3), (16.6, 0.4), (16.6, 0.4)]),
    "vowel": dict(table=3, CART=[(53.0, 2.3)], MH=[(52.8, 2.3), (51.5, 2.3), (51.5, 2.3)],
                  SAMME=[(43.9, 2.3), (43.3, 2.3), (43.3, 2.3)],
                  SAMME_R=[(43.9, 2.3), (46.3, 2.3), (46.7, 2.3)]),
    "segmentation": dict(table=3, CART=[(9.3, 0.6)], MH=[(4.5, 0.5), (4.5, 0.5), (4.5, 0.5)],
                         SAMME=[(4.9, 0.5), (5.0, 0.5), (5.1, 0.5)],
                         SAMME_R=[(5.3, 0.5), (4.9, 0.5), (5.0, 0.5)]),
    "letter": dict(table=3, CART=[(13.5, 0.5)], MH=[(3.0, 0.3), (2.8, 0.3), (2.6, 0.3)],
                   SAMME=[(2.6, 0.3), (2.4, 0.2), (2.3, 0.2)],
                   SAMME_R=[(2.6, 0.3), (2.5, 0.2), (2.4, 0.2)]),
}
PAPER_ITERATIONS = (200, 400, 600)
LOADERS = {"vowel": "load_vowel", "segmentation": "load_segmentation", "letter": "load_letter"}
METHODS = {"SAMME": A.samme, "SAMME_R": A.samme_r, "MH": _adaboost_mh.adaboost_mh}
LABEL = {"SAMME": "SAMME (Zhu et al. Alg. 2)", "SAMME_R": "SAMME.R (Zhu et al. Alg. 4)",
         "MH": "real AdaBoost.MH (Schapire and Singer 1999, Z-minimising trees, leaves "
               "1/2 ln((W+ + eps)/(W- + eps)), eps = 1/(nK); experiments/configs/_adaboost_mh.py)"}
SHOWN = {"SAMME": "SAMME", "SAMME_R": "SAMME.R", "MH": "AdaBoost.MH"}
OBLIVIOUS = ("samme", "samme_r", "logitboost", "multinomial_gb")
OBLIVIOUS_NAMES = {
    "samme": "SAMME, learning rate 1",
    "samme_r": "SAMME.R, learning rate 1",
    "logitboost": "K-class LogitBoost (FHT 2000 Alg. 6), learning rate 1, z clipped at 4",
    "multinomial_gb": "gradient boosting, multinomial deviance, Newton trees with vector leaves, "
                      "learning rate 0.1",
}


def get_config(smoke: bool = False) -> dict:
    small = dict(depths=[1, 2, 3, 4, 5], cart_depths=[1, 2, 3, 4, 5, 6, 8], n_bins=256,
                 cv_rounds=600)
    # vowel: whole speakers per fold (its training rows are 8 speakers x 66 rows, in order; the
    # test rows are 7 other speakers), deeper trees, the CV after 200 rounds (a depth-8 fit of
    # 600 rounds takes minutes); the test error at every depth is shown beside the choice
    vowel = dict(depths=[1, 2, 3, 4, 5, 6, 7, 8], cart_leaves=[8, 16, 32, 64, 128],
                 n_bins=256, cv_rounds=200, group_rows=66, depth_trend=True)
    config = dict(
        description="SAMME / SAMME.R by Zhu et al.'s protocol (CV-sized trees, 600 iterations) "
                    "beside their Tables 1 and 3; oblivious-tree SAMME, SAMME.R, LogitBoost, "
                    "multinomial GB",
        seed=0, folds=5, n_rounds=600, report_at=list(PAPER_ITERATIONS),
        methods=["SAMME", "SAMME_R", "MH"],
        waveform=dict(draws=10, n_train=300, n_test=5000),
        datasets=dict(waveform=dict(small), vowel=dict(vowel), segmentation=dict(small),
                      # letter: loss-guided trees (J leaves); its grid is what the machine affords
                      # (docstring: Cost); size_trend: SAMME's test error at every J of the grid
                      # and at trend_leaves (outside the CV choice)
                      letter=dict(leaves=[128, 256], cart_leaves=[256, 512, 1024], n_bins=16,
                                  cv_rounds=200, size_trend=True, trend_leaves=[512])),
        # the oblivious-tree part: depth and rounds per data set
        oblivious=dict(waveform=[3, 600], vowel=[4, 600], segmentation=[3, 600], letter=[6, 200]),
        gb_learning_rate=0.1, peers=True,
        # outside CV, on the test rows (a trend, not a choice): scikit-learn's SAMME on deeper
        # trees than jboost's grid affords, and its CART grown until its leaves are pure
        trend=dict(letter=[12, 14]))
    if smoke:
        config.update(n_rounds=20, report_at=[10, 20], waveform=dict(draws=2, n_train=300, n_test=500),
                      # letter's loss-guided paths (CV, investigation rows) on segmentation
                      datasets=dict(segmentation=dict(leaves=[4], cart_depths=[2], n_bins=256,
                                                      cv_rounds=20, size_trend=True,
                                                      trend_leaves=[3]),
                                    vowel=dict(vowel, depths=[2], cart_leaves=[8], cv_rounds=5)),
                      trend={},
                      oblivious=dict(segmentation=[2, 10]))
    return config


def _splits(name, config, data_dir):
    """``[(X, y, X_test, y_test), ...]``: the given split, or waveform's independent draws."""
    if name != "waveform":
        return [getattr(jboost.datasets, LOADERS[name])(data_dir=data_dir)]
    w = config["waveform"]
    out = []
    for draw in range(w["draws"]):
        X, y = jboost.datasets.waveform(w["n_train"] + w["n_test"], seed=draw)
        out.append((X[:w["n_train"]], y[:w["n_train"]], X[w["n_train"]:], y[w["n_train"]:]))
    return out


def _n_classes(splits) -> int:
    """K: one more than the largest label of any training or test set."""
    return int(max(max(s[1].max(), s[3].max()) for s in splits)) + 1


def _grid(settings, cart=False):
    """``(family, sizes)`` of a data set's weak learners (``cart``: of its single tree):
    loss-guided trees of ``max_leaves`` J from ``leaves`` / ``cart_leaves`` where given, else
    depth-wise trees of ``depths`` / ``cart_depths``."""
    prefix = "cart_" if cart else ""
    if settings.get(prefix + "leaves"):
        return "lossguide", list(settings[prefix + "leaves"])
    return "depthwise", list(settings[prefix + "depths"])


def _size_words(family, size) -> str:
    return f"{size} leaves" if family == "lossguide" else f"depth {size}"


def _fit(method, X, y, k, size, n_rounds, n_bins, seed, family="depthwise"):
    """One fit of ``method`` on depth-wise trees of depth ``size`` or loss-guided trees of
    ``max_leaves=size`` (no depth bound but the leaves)."""
    tree = (dict(tree_family="lossguide", max_leaves=size, depth=None) if family == "lossguide"
            else dict(tree_family="depthwise", depth=size))
    return METHODS[method](X, y, n_classes=k, n_rounds=n_rounds, n_bins=n_bins, key=seed, **tree)


def _test_errors(model, X, y):
    """``(n_rounds,)`` the misclassification rate after each round."""
    return np.asarray(staged_metric(model, X, y, multiclass_error), np.float64)


def cv_error(method, X, y, k, depth, n_rounds, n_bins, fold, seed, family="depthwise") -> float:
    """The five-fold CV misclassification rate of ``method`` after ``n_rounds`` rounds: every
    held-out row counted once (``fold``: ``(n,)`` fold ids)."""
    wrong = 0  # an integer count: equal errors compare equal (float rates differ in the last bit)
    for f in range(int(fold.max()) + 1):
        tr, va = fold != f, fold == f
        model = _fit(method, X[tr], y[tr], k, depth, n_rounds, n_bins, seed, family)
        wrong += int(np.sum(np.asarray(jboost.predict_class(model, X[va])) != y[va]))
    return wrong / len(y)


def cv_folds(y, folds: int, seed: int, group_rows=None) -> np.ndarray:
    """``(n,)`` fold ids: stratified by class, or (``group_rows``: consecutive blocks of that
    many rows are one group, e.g. one speaker's) whole groups per fold, group ``g`` in fold
    ``g % folds``."""
    if group_rows is None:
        return jboost.sweep.fold_ids(y, folds, seed=seed, stratified=True)
    return (np.arange(len(y)) // group_rows) % folds


def choose_depth(method, X, y, k, depths, n_rounds, n_bins, folds, seed, group_rows=None,
                 family="depthwise"):
    """``(size, {size: CV error})``: the tree size (depth, or leaves of loss-guided trees) of
    least CV error (the smallest of ties)."""
    fold = cv_folds(y, folds, seed, group_rows)
    errors = {d: cv_error(method, X, y, k, d, n_rounds, n_bins, fold, seed, family) for d in depths}
    best = min(errors.values())
    return min(d for d, e in errors.items() if e == best), errors


def _kw(tree: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in tree.items())


def _sklearn_samme(X, y, Xt, yt, n_rounds, seed, **tree):
    """scikit-learn's SAMME on CART trees of ``tree`` (``max_depth`` or ``max_leaf_nodes``),
    learning rate 1: the test error after each round (an early stop repeats its last), or None
    without scikit-learn."""
    try:
        from sklearn.ensemble import AdaBoostClassifier
        from sklearn.tree import DecisionTreeClassifier
    except ImportError:
        return None
    clf = AdaBoostClassifier(DecisionTreeClassifier(random_state=seed, **tree),
                             n_estimators=n_rounds, learning_rate=1.0, random_state=seed)
    clf.fit(np.asarray(X, np.float64), y)
    err = [np.mean(p != yt) for p in clf.staged_predict(np.asarray(Xt, np.float64))]
    return np.asarray(err + err[-1:] * (n_rounds - len(err)))


def _sklearn_cart(X, y, Xt, yt, seed, **tree):
    try:
        from sklearn.tree import DecisionTreeClassifier
    except ImportError:
        return None
    tree = DecisionTreeClassifier(random_state=seed, **tree).fit(np.asarray(X, np.float64), y)
    return float(np.mean(tree.predict(np.asarray(Xt, np.float64)) != yt))


def _published(ds, method, at, report_at):
    """``(value, standard error)`` as fractions, or ``(None, None)``."""
    values = PUBLISHED[ds][method]
    if method == "CART":
        return values[0][0] / 100, values[0][1] / 100
    if report_at != list(PAPER_ITERATIONS):
        return None, None
    v, se = values[PAPER_ITERATIONS.index(at)]
    return v / 100, se / 100


def protocol(ds, settings, splits, config, ctx, log):
    """The paper's protocol on one data set: ``(rows, checks, curves)``."""
    seed, folds, n_rounds, report_at = (config["seed"], config["folds"], config["n_rounds"],
                                        config["report_at"])
    X, y = splits[0][0], splits[0][1]
    k = _n_classes(splits)
    n_bins, src = settings["n_bins"], SOURCE.format(PUBLISHED[ds]["table"])
    draws = len(splits)
    over = f", mean of {draws} draws" if draws > 1 else ""
    cv_note = (f"5-fold CV after {settings['cv_rounds']} rounds" +
               (" on the first draw's training rows" if draws > 1 else "") +
               (f" (folds of whole speakers: {settings['group_rows']} rows each)"
                if settings.get("group_rows") else ""))
    rows, checks, curves, chosen = [], {}, {}, {}

    def row(quantity, algorithm, ours, published=None, se=None):
        q = f"{ds}: {quantity}" + (f" (published SE {se:.3f})" if se is not None else "")
        rows.append(dict(quantity=q, algorithm=algorithm, published=published,
                         source=src if published is not None else None, ours=ours))

    # CART: one Gini tree of CV-chosen size.
    t0 = time.time()
    groups = settings.get("group_rows")
    cart_family, cart_sizes = _grid(settings, cart=True)
    d_cart, cv_cart = choose_depth("SAMME", X, y, k, cart_sizes, 1, n_bins, folds, seed, groups,
                                   cart_family)
    cart = [_test_errors(_fit("SAMME", Xs, ys, k, d_cart, 1, n_bins, seed, cart_family), Xt, yt)[-1]
            for Xs, ys, Xt, yt in splits]
    log(dataset=ds, method="CART", cv_errors=cv_cart, size=d_cart, test_error=float(np.mean(cart)),
        seconds=time.time() - t0)
    pub, se = _published(ds, "CART", None, report_at)
    kind = ("loss-guided (best-first)" if cart_family == "lossguide" else "depth-wise")
    name = (f"CART: one {kind} Gini tree, leaves vote their plurality class, "
            f"{_size_words(cart_family, d_cart)} chosen by "
            f"{cv_note.replace(str(settings['cv_rounds']) + ' rounds', '1 round')} from "
            f"{cart_sizes}")
    row(f"CART test error{over}", name, float(np.mean(cart)), pub, se)
    if cart_family == "lossguide":
        row(f"CART: leaves chosen by CV (its CV error {cv_cart[d_cart]:.4f}; CV errors by leaves "
            + ", ".join(f"{d}: {e:.3f}" for d, e in cv_cart.items()) + ")", name, d_cart)
    if config["peers"]:
        for d in [d_cart] + (["None"] if ds in config["trend"] else []):
            tree = (dict(max_depth=None) if d == "None" else
                    dict(max_leaf_nodes=d) if cart_family == "lossguide" else dict(max_depth=d))
            sk = [_sklearn_cart(*s, seed, **tree) for s in splits]
            if sk[0] is not None:
                row(f"CART test error{over}", f"scikit-learn DecisionTreeClassifier({_kw(tree)})" +
                    (": grown until its leaves are pure, not chosen (the trend with tree size)"
                     if d == "None" else ""), float(np.mean(sk)), pub, se)

    family, sizes = _grid(settings)
    kind = ("loss-guided (best-first) trees of" if family == "lossguide" else "depth-wise trees of")
    for method in config["methods"]:
        t0 = time.time()
        depth, cv = choose_depth(method, X, y, k, sizes, settings["cv_rounds"], n_bins,
                                 folds, seed, groups, family)
        chosen[method] = depth
        errs = np.stack([_test_errors(_fit(method, Xs, ys, k, depth, n_rounds, n_bins, seed, family),
                                      Xt, yt)
                         for Xs, ys, Xt, yt in splits])
        curves[(ds, method)] = errs.mean(axis=0)
        log(dataset=ds, method=method, cv_errors=cv, size=depth,
            test_error=errs.mean(axis=0)[[m - 1 for m in report_at]], seconds=time.time() - t0)
        name = (f"{LABEL[method]}, learning rate 1, {kind} {_size_words(family, depth)} chosen by "
                f"{cv_note} from {sizes}")
        what = "leaves" if family == "lossguide" else "depth"
        row(f"{SHOWN[method]}: {what} chosen by CV (its CV error {cv[depth]:.4f}"
            + (f"; CV errors by {what} " + ", ".join(f"{d}: {e:.3f}" for d, e in cv.items())
               if family == "lossguide" else "") + ")", name, depth)
        for m in report_at:
            pub, se = _published(ds, method, m, report_at)
            mean = float(errs[:, m - 1].mean())
            row(f"{SHOWN[method]} test error after {m} iterations{over}", name, mean, pub, se)
            if pub is not None and m == PAPER_ITERATIONS[-1]:
                checks[f"{ds}_{method.lower()}_{m}_within_2_published_se"] = bool(abs(mean - pub) <= 2 * se)
        if draws > 1:
            row(f"{SHOWN[method]}: standard error over the {draws} draws after "
                f"{report_at[-1]} iterations", name,
                float(errs[:, -1].std(ddof=1) / np.sqrt(draws)))

    if settings.get("depth_trend"):
        rows += depth_study(ds, settings, splits[0], k, config, log)
    if settings.get("size_trend"):
        rows += size_study(ds, settings, splits[0], k, config, chosen["SAMME"],
                           curves[(ds, "SAMME")], log)

    if config["peers"]:
        t0 = time.time()
        tree = (dict(max_leaf_nodes=chosen["SAMME"]) if family == "lossguide"
                else dict(max_depth=chosen["SAMME"]))
        sk = [_sklearn_samme(*s, n_rounds, seed, **tree) for s in splits]
        if sk[0] is not None:
            sk = np.stack(sk)
            curves[(ds, "sklearn")] = sk.mean(axis=0)
            name = (f"scikit-learn AdaBoostClassifier (SAMME), learning rate 1, "
                    f"DecisionTreeClassifier({_kw(tree)}) (our CV's SAMME "
                    f"{'leaves' if family == 'lossguide' else 'depth'})")
            for m in report_at:
                pub, se = _published(ds, "SAMME", m, report_at)
                row(f"SAMME test error after {m} iterations{over}", name, float(sk[:, m - 1].mean()),
                    pub, se)
            log(dataset=ds, method="sklearn SAMME", seconds=time.time() - t0)

    for depth in config["trend"].get(ds, []) if config["peers"] else []:
        t0 = time.time()
        sk = [_sklearn_samme(*s, n_rounds, seed, max_depth=depth) for s in splits]
        if sk[0] is not None:
            name = (f"investigation: scikit-learn AdaBoostClassifier (SAMME), learning rate 1, "
                    f"DecisionTreeClassifier(max_depth={depth}): not chosen (the trend with tree "
                    f"size)")
            row(f"SAMME test error after {report_at[-1]} iterations{over}", name,
                float(np.mean([e[-1] for e in sk])))
            log(dataset=ds, method=f"sklearn SAMME depth {depth}", seconds=time.time() - t0)

    if "MH" not in config["methods"]:
        for m in (report_at if report_at == list(PAPER_ITERATIONS) else []):
            pub, se = _published(ds, "MH", m, report_at)
            row(f"AdaBoost.MH test error after {m} iterations{over}",
                "AdaBoost.MH (Schapire and Singer 1999)", "not run (config: methods)", pub, se)
    return rows, checks, curves


def size_study(ds, settings, split, k, config, chosen, curve, log):
    """The investigation beside a CV choice of loss-guided SAMME's leaves: the test error after
    each reported iteration at every J of the grid and of ``trend_leaves`` (the chosen J's curve
    reused); the test rows are read here, after the choice, and choose nothing."""
    X, y, Xt, yt = split
    seed, n_rounds, n_bins = config["seed"], config["n_rounds"], settings["n_bins"]
    rows = []
    grid = _grid(settings)[1]
    for j in sorted(set(grid) | set(settings.get("trend_leaves", []))):
        t0 = time.time()
        err = curve if j == chosen else _test_errors(
            _fit("SAMME", X, y, k, j, n_rounds, n_bins, seed, "lossguide"), Xt, yt)
        log(dataset=ds, method=f"SAMME {j} leaves", test_error=err[[m - 1 for m in config["report_at"]]],
            seconds=time.time() - t0)
        for m in config["report_at"]:
            rows.append(dict(
                quantity=f"{ds}: SAMME test error after {m} iterations with {j} leaves",
                algorithm=f"investigation: {LABEL['SAMME']}, learning rate 1, loss-guided trees of "
                          f"{j} leaves: " + ("every J of the grid" if j in grid else "beyond the grid")
                          + (" (the CV choice)" if j == chosen else ", not chosen")
                          + " (the trend with tree size)",
                published=None, source=None, ours=float(err[m - 1])))
    return rows


def depth_study(ds, settings, split, k, config, log):
    """The investigation beside a grouped CV choice (SAMME): what CV on stratified row folds (the
    rows of one speaker on both sides) would choose, and the test error after the last iteration
    at every depth of the grid; the test rows are read here, after the choice, and choose nothing."""
    X, y, Xt, yt = split
    seed, n_rounds, n_bins = config["seed"], config["n_rounds"], settings["n_bins"]
    rows = []
    t0 = time.time()
    depth, cv = choose_depth("SAMME", X, y, k, settings["depths"], settings["cv_rounds"], n_bins,
                             config["folds"], seed)
    log(dataset=ds, method="SAMME, stratified row folds", cv_errors=cv, depth=depth,
        seconds=time.time() - t0)
    rows.append(dict(
        quantity=f"{ds}: SAMME depth that 5-fold CV on stratified row folds would choose (its CV "
                 f"error {cv[depth]:.4f}; CV errors by depth "
                 + ", ".join(f"{d}: {e:.3f}" for d, e in cv.items()) + ")",
        algorithm=f"investigation: {LABEL['SAMME']}, CV after {settings['cv_rounds']} rounds, "
                  "folds of rows (each speaker on both sides), not used",
        published=None, source=None, ours=depth))
    for d in settings["depths"]:
        t0 = time.time()
        err = float(_test_errors(_fit("SAMME", X, y, k, d, n_rounds, n_bins, seed), Xt, yt)[-1])
        log(dataset=ds, method=f"SAMME depth {d}", test_error=err, seconds=time.time() - t0)
        rows.append(dict(
            quantity=f"{ds}: SAMME test error after {n_rounds} iterations at depth {d}",
            algorithm=f"investigation: {LABEL['SAMME']}, learning rate 1, depth-wise trees of "
                      f"depth {d}: every depth of the grid, not chosen (the trend with tree size)",
            published=None, source=None, ours=err))
    return rows


def _oblivious(name, X, y, depth, n_rounds, seed, gb_lr, k):
    if name == "multinomial_gb":
        return jboost.fit(X, y, "multinomial_deviance", n_rounds=n_rounds, depth=depth,
                          learning_rate=gb_lr, key=seed, n_outputs=k)
    fn = {"samme": A.samme, "samme_r": A.samme_r, "logitboost": A.logitboost}[name]
    return fn(X, y, n_classes=k, n_rounds=n_rounds, depth=depth, key=seed)


def oblivious_rows(ds, splits, depth, n_rounds, config, log):
    """Test error after the last round of the four algorithms on oblivious trees."""
    k = _n_classes(splits)
    over = f", mean of {len(splits)} draws" if len(splits) > 1 else ""
    rows = []
    for algo in OBLIVIOUS:
        t0 = time.time()
        err = np.mean([_test_errors(_oblivious(algo, Xs, ys, depth, n_rounds, config["seed"],
                                               config["gb_learning_rate"], k), Xt, yt)[-1]
                       for Xs, ys, Xt, yt in splits])
        log(dataset=ds, method=f"oblivious {algo}", test_error=float(err), seconds=time.time() - t0)
        rows.append(dict(quantity=f"{ds}: test error after {n_rounds} rounds{over}",
                         algorithm=f"{OBLIVIOUS_NAMES[algo]}, oblivious trees of depth {depth}",
                         published=None, source=None, ours=float(err)))
    return rows


def run(config: dict, ctx) -> dict:
    table, checks, curves, seconds = [], {}, {}, {}
    step = [0]

    def log(**metrics):
        step[0] += 1
        ctx.log(step[0], **metrics)

    splits = {ds: _splits(ds, config, ctx.data_dir)
              for ds in dict.fromkeys([*config["datasets"], *config["oblivious"]])}
    for ds, settings in config["datasets"].items():
        t0 = time.time()
        rows, ok, c = protocol(ds, settings, splits[ds], config, ctx, log)
        table += rows
        checks.update(ok)
        curves.update(c)
        seconds[f"{ds}/protocol"] = time.time() - t0
    for ds, (depth, n_rounds) in config["oblivious"].items():
        t0 = time.time()
        table += oblivious_rows(ds, splits[ds], depth, n_rounds, config, log)
        seconds[f"{ds}/oblivious"] = time.time() - t0
    ctx.savefig(_figure(ctx.pyplot, config, curves), "test_error_vs_iterations")
    return dict(table=table, checks=checks, seconds=seconds)


def _figure(plt, config, curves):
    """Test error against iterations per data set: our SAMME, SAMME.R and AdaBoost.MH,
    scikit-learn's SAMME, and the published SAMME points with two standard errors."""
    if plt is None:
        return None
    names = list(config["datasets"])
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.8), squeeze=False)
    for ax, ds in zip(axes[0], names):
        for key, label in (("SAMME", "SAMME"), ("SAMME_R", "SAMME.R"), ("MH", "AdaBoost.MH"),
                           ("sklearn", "scikit-learn SAMME")):
            c = curves.get((ds, key))
            if c is not None:
                ax.plot(np.arange(1, len(c) + 1), c, lw=1, label=f"{label} ({c[-1]:.3f})")
        if config["report_at"] == list(PAPER_ITERATIONS):
            v = np.array(PUBLISHED[ds]["SAMME"]) / 100
            ax.errorbar(PAPER_ITERATIONS, v[:, 0], yerr=2 * v[:, 1], fmt="o", color="k", ms=3,
                        capsize=3, label="published SAMME, 2 SE")
        ax.set_title(ds, fontsize=9)
        ax.set_xlabel("iterations")
        ax.set_ylabel("test error")
        ax.legend(fontsize=7)
    fig.suptitle("SAMME, SAMME.R and AdaBoost.MH with CV-sized trees (letter: loss-guided, the others: "
                 "depth-wise), learning rate 1 (Zhu et al. 2006 protocol)", fontsize=9)
    fig.tight_layout()
    return fig
