"""Stable hashing -> uniform and normal draws.

The sim's randomness is a pure function of its inputs: a blake2b digest of the parts, read as
64-bit uniforms. No Python `hash()` (salted per process), no global `random`, and no numpy
Generator on the hot path (creating one costs ~30 us; a digest costs ~1 us).
"""

from __future__ import annotations

import hashlib
import json
import statistics

_NORMAL = statistics.NormalDist()
_TWO64 = float(2 ** 64)


def digest(*parts: object) -> bytes:
  """64-byte blake2b of the parts, each encoded unambiguously."""
  h = hashlib.blake2b(digest_size=64)
  for p in parts:
    b = p if isinstance(p, bytes) else repr(p).encode("utf-8")
    h.update(len(b).to_bytes(8, "little"))
    h.update(b)
  return h.digest()


def uniforms(*parts: object) -> list[float]:
  """Eight independent U(0, 1) draws (open interval) from the parts."""
  d = digest(*parts)
  return [(int.from_bytes(d[i:i + 8], "little") + 0.5) / _TWO64 for i in range(0, 64, 8)]


def normals(*parts: object) -> list[float]:
  """Eight independent N(0, 1) draws from the parts."""
  return [_NORMAL.inv_cdf(u) for u in uniforms(*parts)]


def inv_phi(u: float) -> float:
  """Standard normal quantile."""
  return _NORMAL.inv_cdf(u)


def phi(z: float) -> float:
  """Standard normal CDF."""
  return _NORMAL.cdf(z)


def seed_int(*parts: object) -> int:
  """A 64-bit integer seed for a numpy Generator (used off the hot path)."""
  return int.from_bytes(digest(*parts)[:8], "little")


def messages_fingerprint(messages: list[dict]) -> bytes:
  """Canonical bytes of a message list (role + content only, in order)."""
  return json.dumps([[m["role"], m["content"]] for m in messages], ensure_ascii=False,
                    separators=(",", ":")).encode("utf-8")
