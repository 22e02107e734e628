"""Benchmarks of jboost beside its peers: scripts run as files (``python benchmarks/<name>.py``;
results in ``benchmarks/RESULTS.md``). A package only for ``python -m benchmarks.smoke``, CI's
peer check (:mod:`benchmarks.smoke`)."""
