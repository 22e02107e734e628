"""Losses as pure functions: per-sample losses ``loss(y, raw) -> scalar`` with their links and
optimal constant baselines, batch objectives, distributions, and the derivatives boosting takes
from them by autodiff (the public namespace ``jboost.losses``).

See ``docs/losses.md``; how to add a loss, a batch objective or a distribution:
``docs/extending.md``.
"""

from jboost.losses.baselines import baseline
from jboost.losses.baselines import half_logit_baseline
from jboost.losses.baselines import huber_baseline
from jboost.losses.baselines import lbfgs_minimize
from jboost.losses.baselines import log_freq_baseline
from jboost.losses.baselines import log_mean_baseline
from jboost.losses.baselines import logit_baseline
from jboost.losses.baselines import mean_baseline
from jboost.losses.baselines import median_baseline
from jboost.losses.baselines import numeric_baseline
from jboost.losses.baselines import quantile_baseline
from jboost.losses.baselines import samme_baseline
from jboost.losses.baselines import weighted_quantile
from jboost.losses.checks import check_labels
from jboost.losses.checks import query_starts
from jboost.losses.links import TASK_LINKS
from jboost.losses.links import adaboost_link
from jboost.losses.links import exp_link
from jboost.losses.links import identity_link
from jboost.losses.links import samme_link
from jboost.losses.links import sigmoid_link
from jboost.losses.links import softmax_link
from jboost.losses.loss import BATCH_HESSIANS
from jboost.losses.loss import Domains
from jboost.losses.loss import HESSIANS
from jboost.losses.loss import Interval
from jboost.losses.loss import LEAF_REFITS
from jboost.losses.loss import Loss
from jboost.losses.loss import POSITIVE
from jboost.losses.loss import PROBABILITY
from jboost.losses.loss import TASKS
from jboost.losses.loss import as_predicted
from jboost.losses.loss import batch_raw
from jboost.losses.loss import batch_value
from jboost.losses.loss import column_loss
from jboost.losses.loss import columnwise
from jboost.losses.loss import keeps_columns
from jboost.losses.loss import per_sample_losses
from jboost.losses.loss import total_loss
from jboost.losses.loss import vector_fn
from jboost.losses.objectives import runs
from jboost.losses.per_sample import BUILT_IN_FNS
from jboost.losses.per_sample import SHIFT_EQUIVARIANT_FNS
from jboost.losses.per_sample import absolute_error
from jboost.losses.per_sample import absolute_error_fn
from jboost.losses.per_sample import binomial_deviance
from jboost.losses.per_sample import binomial_deviance_fn
from jboost.losses.per_sample import exponential
from jboost.losses.per_sample import exponential_fn
from jboost.losses.per_sample import get
from jboost.losses.per_sample import huber
from jboost.losses.per_sample import huber_fn
from jboost.losses.per_sample import is_built_in
from jboost.losses.per_sample import multinomial_deviance
from jboost.losses.per_sample import multinomial_deviance_fn
from jboost.losses.per_sample import poisson
from jboost.losses.per_sample import poisson_fn
from jboost.losses.per_sample import quantile
from jboost.losses.per_sample import quantile_fn
from jboost.losses.per_sample import safe_exp
from jboost.losses.per_sample import samme_exponential
from jboost.losses.per_sample import samme_exponential_fn
from jboost.losses.per_sample import shifts_with_labels
from jboost.losses.per_sample import squared_error
from jboost.losses.per_sample import squared_error_fn
