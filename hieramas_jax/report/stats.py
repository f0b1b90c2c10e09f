"""Statistics a reader can trust (the paper reports none): intervals per cell, paired tests, seed spread.

- `bootstrap_ci`: percentile bootstrap interval of a mean over queries (accuracy: the mean of 0/1).
- `paired_difference`: method A against method B on the same queries: the mean difference, its
  paired percentile-bootstrap interval (queries resampled together, so the items' shared difficulty
  cancels), and McNemar's exact test on the discordant pairs (two-sided binomial, p = 0.5).
- `mean_sd`: mean +- sample standard deviation over seeds.
- `key_seed`, `correct_vector`: a cell's bootstrap seed (from its key) and its per-query 0/1 outcomes.

Every resampling uses a numpy Generator seeded explicitly, so a table is the same on every rebuild.
"""

from __future__ import annotations

import math
import zlib
from typing import Any, Mapping, Sequence

import numpy as np

N_BOOT = 10_000
LEVEL = 0.95


def _percentiles(samples: np.ndarray, level: float) -> tuple[float, float]:
  lo, hi = np.quantile(samples, [(1 - level) / 2, 1 - (1 - level) / 2], method="inverted_cdf")
  return float(lo), float(hi)


def bootstrap_means(values: Sequence[float], *, n_boot: int = N_BOOT, seed: int = 0) -> np.ndarray:
  """Means of `n_boot` resamples (with replacement, same size) of `values`."""
  x = np.asarray(values, np.float64)
  if x.size == 0:
    raise ValueError("bootstrap of zero values")
  rng = np.random.default_rng(seed)
  idx = rng.integers(0, x.size, size=(n_boot, x.size))
  return x[idx].mean(axis=1)


def bootstrap_ci(values: Sequence[float], *, level: float = LEVEL, n_boot: int = N_BOOT,
                 seed: int = 0) -> tuple[float, float]:
  """Percentile bootstrap interval of the mean of `values`."""
  return _percentiles(bootstrap_means(values, n_boot=n_boot, seed=seed), level)


def mcnemar_exact_p(a: Sequence[bool], b: Sequence[bool]) -> tuple[float, int, int]:
  """Two-sided exact McNemar test of paired binary outcomes.

  Returns:
    (p, n10, n01): n10 = pairs where only `a` is correct, n01 = only `b`; p = min(1, 2 P[X <= min]),
    X ~ Binomial(n10 + n01, 1/2); p = 1 with no discordant pair.
  """
  a = np.asarray(a, bool)
  b = np.asarray(b, bool)
  if a.shape != b.shape:
    raise ValueError(f"paired outcomes of different lengths: {a.shape} vs {b.shape}")
  n10 = int((a & ~b).sum())
  n01 = int((~a & b).sum())
  n = n10 + n01
  if n == 0:
    return 1.0, n10, n01
  k = min(n10, n01)
  tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
  return min(1.0, 2.0 * tail), n10, n01


def paired_difference(a: Sequence[float], b: Sequence[float], *, scale: float = 1.0, level: float = LEVEL,
                      n_boot: int = N_BOOT, seed: int = 0) -> dict[str, Any]:
  """Mean of a - b over paired queries (times `scale`, e.g. 100 for points), its bootstrap interval, and
  for 0/1 outcomes McNemar's exact p."""
  x = np.asarray(a, np.float64)
  y = np.asarray(b, np.float64)
  if x.shape != y.shape:
    raise ValueError(f"paired outcomes of different lengths: {x.shape} vs {y.shape}")
  d = scale * (x - y)
  lo, hi = bootstrap_ci(d, level=level, n_boot=n_boot, seed=seed)
  out = {"delta": float(d.mean()), "ci": [lo, hi], "n": int(d.size)}
  if set(np.unique(x)) <= {0.0, 1.0} and set(np.unique(y)) <= {0.0, 1.0}:
    p, n10, n01 = mcnemar_exact_p(x.astype(bool), y.astype(bool))
    out.update({"p_mcnemar": p, "only_a": n10, "only_b": n01})
  return out


def mean_sd(values: Sequence[float]) -> tuple[float, float | None]:
  """Mean and sample standard deviation (None with a single value)."""
  x = np.asarray(values, np.float64)
  if x.size == 0:
    raise ValueError("mean of zero values")
  return float(x.mean()), (float(x.std(ddof=1)) if x.size > 1 else None)


def key_seed(key: str) -> int:
  """The bootstrap seed of a cell (or a pair: `key + "|paired"`): a function of its key alone, so a
  table rebuilt from its record draws the same resamples, whatever else the record holds."""
  return zlib.crc32(key.encode())


def correct_vector(cell: Mapping[str, Any]) -> np.ndarray:
  """A cell record's per-query outcomes (test-split order) as 0.0 / 1.0."""
  return np.array([c == "1" for c in cell["outcomes"]["correct"]], np.float64)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
  """Indices of the (cost, accuracy) points no other point beats on both (cheaper or equal and more
  accurate or equal, strictly better on one), sorted by cost."""
  front = []
  for i, (c, a) in enumerate(points):
    dominated = any((c2 <= c and a2 >= a) and (c2 < c or a2 > a) for j, (c2, a2) in enumerate(points) if j != i)
    if not dominated:
      front.append(i)
  return sorted(front, key=lambda i: points[i][0])


def wilson_interval(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
  """95% Wilson score interval of a binomial proportion, in percent, within [0, 100].

  At k = n (or k = 0) the formula's bound is 100 (0) only up to rounding (wilson_interval(4, 4) gave
  99.99999999999999, below the point itself, and matplotlib refuses the negative error bar), so the
  bounds are set exactly there and clipped everywhere.
  """
  if n == 0:
    return float("nan"), float("nan")
  p = k / n
  centre = (p + z * z / (2 * n)) / (1 + z * z / n)
  half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
  lo = 0.0 if k <= 0 else float(np.clip(100.0 * (centre - half), 0.0, 100.0))
  hi = 100.0 if k >= n else float(np.clip(100.0 * (centre + half), 0.0, 100.0))
  return lo, hi


def error_bars(values: Sequence[float], intervals: Sequence[Sequence[float]]) -> list[list[float]]:
  """matplotlib's `yerr` ([[below...], [above...]]) of points with percent intervals: each interval clipped
  to [0, 100] and never on the wrong side of its point (a bootstrap or rounded bound can be), so every bar
  is drawn within the scale and none is negative (which `errorbar` refuses)."""
  below, above = [], []
  for v, (lo, hi) in zip(values, intervals):
    lo, hi = min(max(lo, 0.0), 100.0), min(max(hi, 0.0), 100.0)
    below.append(max(v - lo, 0.0))
    above.append(max(hi - v, 0.0))
  return [below, above]
