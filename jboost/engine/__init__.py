"""jboost.engine."""
