"""Objectives that are not sums over rows: Cox's partial likelihood, listwise ranking, and any
loss written as one function of the whole batch (the public ``jboost.objectives`` namespace;
defined in :mod:`jboost.losses.objectives`, their metrics in :mod:`jboost.losses.metrics`;
described in ``docs/objectives.md``).
"""

from jboost.losses.metrics import concordance_index, ndcg
from jboost.losses.objectives import (batch_loss, cox, cox_breslow_diag, cox_breslow_fn,
                                      cox_efron_diag, cox_efron_fn, gains, lambdarank_fn, ranking,
                                      softmax_cross_entropy_fn, zero_baseline)
