"""jboost.data."""
