"""hieramas_jax.methods (see docs/architecture.md)."""
