"""hieramas-jax: a reproducible JAX experiment suite for HieraMAS (arXiv 2602.20229)."""

__version__ = "0.1.0"
