"""Fitted models: the model protocol and every model type.

:mod:`~jboost.models.base` (the protocol, ``predict`` and its kin), :mod:`~jboost.models.booster`,
:mod:`~jboost.models.forest`, :mod:`~jboost.models.bagged`, :mod:`~jboost.models.ecoc`,
:mod:`~jboost.models.stacked`, :mod:`~jboost.models.ensemble` (what ensembles share),
:mod:`~jboost.models.sums` (every model as a sum of trees), :mod:`~jboost.models.metadata` and
:mod:`~jboost.models.distributional`.
"""

# The model types register themselves (jboost.models.base.register_model_type) when their
# modules are imported: importing the package imports them all, so that model files can name them.
from jboost.models import bagged  # noqa: F401
from jboost.models import base  # noqa: F401
from jboost.models import booster  # noqa: F401
from jboost.models import ecoc  # noqa: F401
from jboost.models import forest  # noqa: F401
from jboost.models import stacked  # noqa: F401
