"""Objectives that are not sums over rows: Cox's partial likelihood, listwise ranking, and any
loss written as one function of the whole batch (the public ``jboost.objectives`` namespace;
defined in :mod:`jboost.losses.objectives`, their metrics in :mod:`jboost.losses.metrics`;
described in ``docs/objectives.md``).
"""

from jboost.losses.metrics import concordance_index
from jboost.losses.metrics import ndcg
from jboost.losses.objectives import batch_loss
from jboost.losses.objectives import cox
from jboost.losses.objectives import cox_breslow_diag
from jboost.losses.objectives import cox_breslow_fn
from jboost.losses.objectives import cox_efron_diag
from jboost.losses.objectives import cox_efron_fn
from jboost.losses.objectives import gains
from jboost.losses.objectives import lambdarank_fn
from jboost.losses.objectives import ranking
from jboost.losses.objectives import softmax_cross_entropy_fn
from jboost.losses.objectives import zero_baseline
