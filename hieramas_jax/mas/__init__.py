"""hieramas_jax.mas (see docs/architecture.md)."""
