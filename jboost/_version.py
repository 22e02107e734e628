"""The version of jboost (written in model files)."""

__version__ = "0.1.0"
