"""Distributional regression: a model predicts a whole distribution per row (the public
``jboost.distributions`` namespace).

The families and natural-gradient losses live in :mod:`jboost.losses.distributions`; fitting with
NGBoost's defaults in :mod:`jboost.algorithms.ngboost`; predictions and scores of the fitted model
in :mod:`jboost.models.distributional`; loading a distributional model in
:mod:`jboost.io.distributional`. NGBoost: Duan et al. (2020), "NGBoost: Natural Gradient Boosting
for Probabilistic Prediction", ICML. The concepts are described in ``docs/distributions.md``.
"""

from jboost.algorithms.ngboost import (LINE_SEARCH, LINE_SEARCH_MAX_SCALE, LINE_SEARCH_TOL,
                                       MIN_LEAF_ROWS, fit, line_search_round, line_search_scale)
from jboost.io.distributional import load_distributional as load
from jboost.losses.distributions.base import (COUNT_CRPS_MAX_TERMS, CRPS_MC_SAMPLES, Distribution,
                                              PPF_BISECTIONS, SUPPORTS, SUPPORT_LABELS,
                                              check_labels, crps_one, quantile, support_nll)
from jboost.losses.distributions.families import (DISTRIBUTIONS, Gamma, LogNormal, NegativeBinomial,
                                                  Normal, Poisson, StudentT)
from jboost.losses.distributions.natural import fisher_information, natural_gradient
from jboost.losses.distributions.nll_loss import distribution_of, loss
from jboost.models.distributional import (crps, nll, predict_interval, predict_params,
                                          predict_quantile)
