"""jboost.models."""
