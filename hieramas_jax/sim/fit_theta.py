"""Fits the competences theta[model, benchmark] to the Base-prompt calibration targets.

For each model and benchmark, solves mean_i sigmoid(theta - b_i) = target over all of that
benchmark's items (Base prompt: no role fit, no step-by-step term, no context), by bisection;
the expectation is exact, so no sampling noise enters the fit.

    python -m hieramas_jax.sim.fit_theta      # writes hieramas_jax/data/sim/theta.json
"""

from __future__ import annotations

import json
import sys

import numpy as np

from hieramas_jax.benchmarks.data import BENCHMARKS
from hieramas_jax.llm.registry import MODELS
from hieramas_jax.sim import params as P
from hieramas_jax.sim.calibration_targets import TARGETS
from hieramas_jax.sim.model import THETA_PATH, all_difficulties

COMMAND = "python -m hieramas_jax.sim.fit_theta"


def solve_theta(target: float, difficulties: np.ndarray) -> float:
  """theta with mean(sigmoid(theta - b)) == target (monotone in theta, so bisection)."""
  if not 0.0 < target < 1.0:
    raise ValueError(f"target accuracy must be in (0, 1), got {target}")
  lo, hi = -20.0, 20.0
  for _ in range(100):
    mid = (lo + hi) / 2
    if np.mean(1.0 / (1.0 + np.exp(-(mid - difficulties)))) < target:
      lo = mid
    else:
      hi = mid
  return (lo + hi) / 2


def fit() -> dict:
  difficulties = {b: all_difficulties(b) for b in BENCHMARKS}
  theta = {m: {b: round(solve_theta(TARGETS[m][b].accuracy, difficulties[b]), 6) for b in BENCHMARKS}
           for m in MODELS}
  return {
      "command": COMMAND,
      "difficulty_seed": P.DIFFICULTY_SEED,
      "difficulty": {"math_level_slope": P.MATH_LEVEL_SLOPE, "math_level_noise": P.MATH_LEVEL_NOISE,
                     "latent_sigma": dict(P.LATENT_DIFFICULTY_SIGMA)},
      "targets": {m: {b: round(TARGETS[m][b].accuracy, 6) for b in BENCHMARKS} for m in MODELS},
      "theta": theta,
  }


def main(argv: list[str]) -> int:
  if len(argv) > 1:
    print(f"usage: {COMMAND}  (takes no arguments)", file=sys.stderr)
    return 2
  result = fit()
  THETA_PATH.parent.mkdir(parents=True, exist_ok=True)
  tmp = THETA_PATH.with_suffix(".tmp")
  tmp.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
  tmp.replace(THETA_PATH)
  for m, row in result["theta"].items():
    print(m, " ".join(f"{b}={v:+.3f}" for b, v in row.items()))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
