"""jboost.fitting."""
