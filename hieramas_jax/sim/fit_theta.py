"""Fits the competences theta[model, benchmark] and what reasoning adds, to the calibration targets.

Every expectation is exact over all of a benchmark's items (bisection on a monotone function), so
no sampling noise enters the fit. Per model and benchmark:
- theta: Base-prompt accuracy (no role, no cue, no context) equals the Base target;
- what a cue to reason adds (`calibration_targets.REASONING_MECHANISM`): for "logit" domains a gap
  g with mean_i sigmoid(theta + g - b_i) = the CoT target; for "slip" domains (MATH) a slip rate s
  with Base = (1 - s) * reasoned accuracy, theta fitted to the reasoned (CoT) accuracy.
The two anchors (GPT-5-Mini, Qwen3-80B) have the paper's CoT row, so their Base and CoT cells hold
exactly; every other model gets the anchors' mean gap or slip rate (assumption: how much a cue to
reason helps is a property of the domain for models without a published CoT/Base pair).

    python -m hieramas_jax.sim.fit_theta      # writes hieramas_jax/data/sim/theta.json
"""

from __future__ import annotations

import json
import sys

import numpy as np

from hieramas_jax.benchmarks.data import BENCHMARKS
from hieramas_jax.llm.registry import MODELS
from hieramas_jax.sim import params as P
from hieramas_jax.sim.calibration_targets import BENCHMARK_DOMAIN, PAPER_BASE, PAPER_COT, REASONING_MECHANISM, TARGETS
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


def _mean_sigmoid(x: float, difficulties: np.ndarray) -> float:
  return float(np.mean(1.0 / (1.0 + np.exp(-(x - difficulties)))))


def fit() -> dict:
  difficulties = {b: all_difficulties(b) for b in BENCHMARKS}
  theta: dict[str, dict[str, float]] = {m: {} for m in MODELS}
  gap: dict[str, dict[str, float]] = {m: {} for m in MODELS}
  slip: dict[str, dict[str, float]] = {m: {} for m in MODELS}
  for b in BENCHMARKS:
    d = difficulties[b]
    mechanism = REASONING_MECHANISM[BENCHMARK_DOMAIN[b]]
    for m in PAPER_COT:  # the anchors: Base and CoT rows both hold exactly
      base, cot = PAPER_BASE[m][b] / 100, PAPER_COT[m][b] / 100
      if mechanism == "slip":
        theta[m][b] = solve_theta(cot, d)
        slip[m][b], gap[m][b] = 1.0 - base / cot, 0.0
      else:
        theta[m][b] = solve_theta(base, d)
        gap[m][b] = solve_theta(cot, d) - theta[m][b]  # theta + g reaches the CoT target
        slip[m][b] = 0.0
    mean_gap = float(np.mean([gap[m][b] for m in PAPER_COT]))
    mean_slip = max(0.0, float(np.mean([slip[m][b] for m in PAPER_COT])))
    for m in MODELS:
      if m in PAPER_COT:
        continue
      gap[m][b], slip[m][b] = mean_gap, mean_slip
      theta[m][b] = solve_theta(TARGETS[m][b].accuracy / (1.0 - mean_slip), d)
  rnd = lambda table: {m: {b: round(v, 6) for b, v in row.items()} for m, row in table.items()}  # noqa: E731
  return {
      "command": COMMAND,
      "difficulty_seed": P.DIFFICULTY_SEED,
      "difficulty": {"math_level_slope": P.MATH_LEVEL_SLOPE, "math_level_noise": P.MATH_LEVEL_NOISE,
                     "latent_sigma": dict(P.LATENT_DIFFICULTY_SIGMA)},
      "targets": {m: {b: round(TARGETS[m][b].accuracy, 6) for b in BENCHMARKS} for m in MODELS},
      "reasoning_mechanism": {b: REASONING_MECHANISM[BENCHMARK_DOMAIN[b]] for b in BENCHMARKS},
      "theta": rnd(theta), "cot_gap": rnd(gap), "slip": rnd(slip),
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
    print(m, " ".join(f"{b}: theta {v:+.3f} gap {result['cot_gap'][m][b]:+.3f} slip {result['slip'][m][b]:.3f}"
                      for b, v in row.items()))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
