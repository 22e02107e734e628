"""Distributional regression: a model predicts a whole distribution per row (the public
``jboost.distributions`` namespace).

The families and natural-gradient losses live in :mod:`jboost.losses.distributions`; fitting with
NGBoost's defaults in :mod:`jboost.algorithms.ngboost`; predictions and scores of the fitted model
in :mod:`jboost.models.distributional`; loading a distributional model in
:mod:`jboost.io.distributional`. NGBoost: Duan et al. (2020), "NGBoost: Natural Gradient Boosting
for Probabilistic Prediction", ICML. The concepts are described in ``docs/distributions.md``.
"""

from jboost.algorithms.ngboost import LINE_SEARCH
from jboost.algorithms.ngboost import LINE_SEARCH_MAX_SCALE
from jboost.algorithms.ngboost import LINE_SEARCH_TOL
from jboost.algorithms.ngboost import MIN_LEAF_ROWS
from jboost.algorithms.ngboost import fit
from jboost.algorithms.ngboost import line_search_round
from jboost.algorithms.ngboost import line_search_scale
from jboost.io.distributional import load_distributional as load
from jboost.losses.distributions.base import COUNT_CRPS_MAX_TERMS
from jboost.losses.distributions.base import CRPS_MC_SAMPLES
from jboost.losses.distributions.base import Distribution
from jboost.losses.distributions.base import PPF_BISECTIONS
from jboost.losses.distributions.base import SUPPORTS
from jboost.losses.distributions.base import SUPPORT_LABELS
from jboost.losses.distributions.base import check_labels
from jboost.losses.distributions.base import crps_one
from jboost.losses.distributions.base import quantile
from jboost.losses.distributions.base import support_nll
from jboost.losses.distributions.families import DISTRIBUTIONS
from jboost.losses.distributions.families import Gamma
from jboost.losses.distributions.families import LogNormal
from jboost.losses.distributions.families import NegativeBinomial
from jboost.losses.distributions.families import Normal
from jboost.losses.distributions.families import Poisson
from jboost.losses.distributions.families import StudentT
from jboost.losses.distributions.natural import fisher_information
from jboost.losses.distributions.natural import natural_gradient
from jboost.losses.distributions.nll_loss import distribution_of
from jboost.losses.distributions.nll_loss import loss
from jboost.models.distributional import crps
from jboost.models.distributional import nll
from jboost.models.distributional import predict_interval
from jboost.models.distributional import predict_params
from jboost.models.distributional import predict_quantile
