"""hieramas_jax.learn (see docs/architecture.md)."""
