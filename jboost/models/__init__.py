"""Fitted models: the model protocol (:mod:`~jboost.models.base`) and every model type.

See docs/models.md.
"""

# The model types register themselves (jboost.models.base.register_model_type) when their
# modules are imported: importing the package imports them all, so that model files can name them.
from jboost.models import bagged  # noqa: F401
from jboost.models import base  # noqa: F401
from jboost.models import booster  # noqa: F401
from jboost.models import ecoc  # noqa: F401
from jboost.models import forest  # noqa: F401
from jboost.models import stacked  # noqa: F401
