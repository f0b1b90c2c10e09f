"""hieramas-jax: a reproducible JAX experiment suite for HieraMAS (arXiv 2602.20229)."""

import sys as _sys

from hieramas_jax import isa as _isa

__version__ = "0.1.0"

# Before any numeric library loads: the same bytes on any x86-64 CPU with AVX2 (hieramas_jax/isa.py).
try:
  _isa.pin()
except _isa.IsaError as _e:
  print(f"error: {_e}", file=_sys.stderr, flush=True)
  raise SystemExit(2) from None
