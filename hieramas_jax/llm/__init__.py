"""hieramas_jax.llm (see docs/architecture.md)."""
