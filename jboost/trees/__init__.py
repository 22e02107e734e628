"""jboost.trees."""
