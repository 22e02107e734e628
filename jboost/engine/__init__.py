"""The boosting engine: the state, the round protocol, ``init`` / ``step`` / ``boost`` and its host
calls, sharded and multi-process rows, samplers, batching, checkpoints and memory estimates. See
docs/engine.md."""
