"""Benchmark: what isolating HumanEval+ programs under bubblewrap costs in grading throughput.

  python experiments/bench_sandbox.py            # writes results/bench.json key "sandbox" (make bench)

Grades the 164 canonical solutions of HumanEval+ (every base and plus input, parent-side verdict) in
both modes in one run: `bwrap` (the isolation, `sandbox.isolation()`) and `fallback` (the
process-group mode the suite used before, same result channel). Expected outputs are computed first
and not timed; grades are not cached. Passes run in ABBA order (`--blocks` times), so a load change
on the shared machine during the run falls on both modes alike. The load average before, after and
after each pass is recorded: other people's jobs share the cores. `light_task_ms_median` is the
latency of grading one task whose program costs next to nothing, sequentially: the per-run price of
each mode (interpreter start, plus namespaces and mounts under bubblewrap). CPU seconds are not
reported: under a pid namespace bubblewrap's monitor exits without reaping its init, so the kernel
never adds the program's CPU time to this process's children. Goal: isolation costs at most 20% of
the fallback's tasks per second.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time

from absl import flags

from hieramas_jax.benchmarks import sandbox
from hieramas_jax.benchmarks.data import load_items
from hieramas_jax.errors import UserError
from hieramas_jax.experiment import cli
from hieramas_jax.experiment.provenance import provenance, update_json_key
from hieramas_jax.experiment.writers import log_bench_run
from hieramas_jax.paths import RESULTS_DIR

FLAGS = flags.FLAGS
flags.DEFINE_integer("blocks", 1, "ABBA blocks: each grades all 164 tasks twice per mode", lower_bound=1)
flags.DEFINE_integer("startup_runs", 20, "sequential runs of one light task per mode, for the per-run cost",
                     lower_bound=1)
flags.DEFINE_string("out", None, "output JSON (default results/bench.json)")

GOAL_MAX_COST = 0.20
LIGHT_TASK = "HumanEval/53"  # add(x, y): the program and its inputs cost next to nothing


async def _grade_all(items, iso: sandbox.Isolation) -> tuple[float, list[str]]:
  """(wall s, ids that did not pass) for one pass over every task."""
  t0 = time.perf_counter()
  grades = await asyncio.gather(*(sandbox.run_candidate(it, it.answer, use_cache=False, iso=iso)
                                  for it in items))
  return time.perf_counter() - t0, [f"{it.id}: {g.detail}" for it, g in zip(items, grades) if not g.correct]


async def _light_task_ms(item, modes: dict[str, sandbox.Isolation], runs: int) -> dict[str, float]:
  """Median ms per sequential grading of `item` in each mode, the modes interleaved (alternating
  which goes first) so that both see the same load."""
  times: dict[str, list[float]] = {m: [] for m in modes}
  for r in range(runs):
    for mode in (list(modes) if r % 2 == 0 else list(modes)[::-1]):
      t0 = time.perf_counter()
      grade = await sandbox.run_candidate(item, item.answer, use_cache=False, iso=modes[mode])
      times[mode].append(time.perf_counter() - t0)
      assert grade.correct, grade
  return {m: round(1000.0 * statistics.median(t), 1) for m, t in times.items()}


async def measure(blocks: int, startup_runs: int) -> dict:
  items = list(load_items("humaneval_plus"))
  isolated = sandbox.isolation()
  if isolated.mode != "bwrap":
    raise UserError(f"bubblewrap cannot run here ({isolated.detail}); nothing to compare")
  modes = {"bwrap": isolated, "fallback": sandbox.fallback_isolation("benchmark baseline")}
  t0 = time.perf_counter()
  for it in items:  # one at a time inside: expected_outputs bounds its own concurrency per task
    await sandbox.expected_outputs(it)
  warm_s = time.perf_counter() - t0
  load_before = os.getloadavg()
  passes: dict[str, list[dict]] = {m: [] for m in modes}
  failures: dict[str, list[str]] = {}
  order = ["bwrap", "fallback", "fallback", "bwrap"] * blocks
  for mode in order:
    wall, failed = await _grade_all(items, modes[mode])
    passes[mode].append({"wall_s": round(wall, 2), "tasks_per_s": round(len(items) / wall, 3),
                         "load_average_1m_after": round(os.getloadavg()[0], 2)})
    if failed:
      failures.setdefault(mode, []).extend(failed)
    print(f"{mode:8s} {len(items) / wall:6.2f} tasks/s  ({wall:.1f} s wall)", flush=True)
  light = next(it for it in items if it.id == LIGHT_TASK)
  startup = await _light_task_ms(light, modes, startup_runs)
  load_after = os.getloadavg()

  def rate(mode):
    return len(items) * len(passes[mode]) / sum(p["wall_s"] for p in passes[mode])

  ratio = rate("bwrap") / rate("fallback")
  cost = 1.0 - ratio
  n_inputs = sum(len(it.meta["base_input"]) + len(it.meta["plus_input"]) for it in items)
  return {
      "tasks": len(items),
      "inputs_per_pass": n_inputs,
      "isolated_tasks_per_s": round(rate("bwrap"), 3),
      "fallback_tasks_per_s": round(rate("fallback"), 3),
      "ratio_isolated_vs_fallback": round(ratio, 3),
      "isolation_cost": round(cost, 3),
      "goal_max_cost": GOAL_MAX_COST,
      "met": cost <= GOAL_MAX_COST,
      "light_task_ms_median": {"task": LIGHT_TASK, **startup},
      "passes": passes,
      "order": order,
      "all_canonical_passed": not failures,
      "failures": failures,
      "expected_outputs_warmup_s": round(warm_s, 1),
      "concurrency": sandbox.max_concurrency(),
      "cpu_count": os.cpu_count(),
      "isolation": isolated.provenance(),
      # The machine is shared: a load average above the core count means other jobs competed for
      # the cores during the run, which slows both modes and widens the noise.
      "load_average": {"before": [round(x, 2) for x in load_before],
                       "after": [round(x, 2) for x in load_after]},
      "busy_machine": max(load_before[0], load_after[0]) > (os.cpu_count() or 1),
  }


def main():
  record = asyncio.run(measure(FLAGS.blocks, FLAGS.startup_runs))
  record["provenance"] = provenance(seed=None, benchmarks=["humaneval_plus"],
                                    flags={k: FLAGS[k].value for k in ("blocks", "startup_runs")})
  out = FLAGS.out or os.path.join(RESULTS_DIR, "bench.json")
  update_json_key(out, "sandbox", record)
  log_bench_run(out, "sandbox", record)
  print(f"isolated {record['isolated_tasks_per_s']} vs fallback {record['fallback_tasks_per_s']} tasks/s: "
        f"isolation costs {100 * record['isolation_cost']:.1f}% (goal <= {100 * GOAL_MAX_COST:.0f}%), "
        f"load {record['load_average']['before'][0]} -> {record['load_average']['after'][0]}; wrote {out}")
  if not record["all_canonical_passed"]:
    print(f"error: canonical solutions failed: {record['failures']}", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
  cli.run(main)
