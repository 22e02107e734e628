"""Losses as pure functions: per-sample losses ``loss(y, raw) -> scalar`` with their links and
optimal constant baselines, batch objectives, distributions, and the derivatives boosting takes
from them by autodiff (the public namespace ``jboost.losses``).

See ``docs/losses.md``; how to add a loss, a batch objective or a distribution:
``docs/extending.md``.
"""

from jboost.losses.baselines import (baseline, half_logit_baseline, huber_baseline, lbfgs_minimize,
                                     log_freq_baseline, log_mean_baseline, logit_baseline,
                                     mean_baseline, median_baseline, numeric_baseline,
                                     quantile_baseline, samme_baseline, weighted_quantile)
from jboost.losses.checks import check_labels, query_starts
from jboost.losses.links import (TASK_LINKS, adaboost_link, exp_link, identity_link, samme_link,
                                 sigmoid_link, softmax_link)
from jboost.losses.loss import (BATCH_HESSIANS, Domains, HESSIANS, Interval, LEAF_REFITS, Loss,
                                POSITIVE, PROBABILITY, TASKS, as_predicted, batch_raw, batch_value,
                                column_loss, columnwise, keeps_columns, per_sample_losses,
                                total_loss, vector_fn)
from jboost.losses.multi_quantile import (noncrossing_inverse, noncrossing_link, quantiles,
                                          quantiles_baseline, quantiles_fn)
from jboost.losses.objectives import runs
from jboost.losses.per_sample import (BUILT_IN_FNS, SHIFT_EQUIVARIANT_FNS, absolute_error,
                                      absolute_error_fn, binomial_deviance, binomial_deviance_fn,
                                      exponential, exponential_fn, get, huber, huber_fn,
                                      is_built_in, multinomial_deviance, multinomial_deviance_fn,
                                      poisson, poisson_fn, quantile, quantile_fn, safe_exp,
                                      samme_exponential, samme_exponential_fn, shifts_with_labels,
                                      squared_error, squared_error_fn)
