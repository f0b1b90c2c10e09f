"""Table 1 on the embedded sim, from a cold cache and from a warm one, in two segments (`results/bench.json`
key `table1`).

Segments: `table` is the command a user runs (`reproduce_table1.py` with no method flag: every row,
the suite's total-cost HieraMAS variant included), goal on 2 cores cold <= 600 s and warm <= 60 s (issue
29: "timed as the user runs it, every row included"). Issue 20's split stays beside it: `published` is
every Table 1 row as its authors ran it (all rows but the total-cost variant), same goals; `suite_recipe_row`
is that variant alone, reported without a goal. `table_jax_encoder` is `table` with every method's sentence
encoder on the jax backend (`learn/jax_encoder.py`, one `--method_option=<method>.encoder=...:jax` per
method that has one): what the table would take if that backend were the default (it is not: switching moves
every learned result's embeddings), same goals. Each segment has its own cold cache, so none warms another.

cold: a fresh cache directory (responses, embeddings, grades, compiled XLA) and a fresh run root, so every
call is made, every text embedded, every program graded and every step compiled. warm: the same caches,
a fresh run root (every cell fits and evaluates again, every call replays from the response cache).
rerun: the warm run's root again (everything is done: the cost of reading the table back). Reported with
calls made and replayed, process and child CPU seconds, the cells whose fit or evaluation took longest
(what dominates), and, for cold and warm, where the CPU went (`profile`: the runner process's CPU by
category and its child processes', from `experiment.profile`, which samples about 1% of a core).

What is timed is `experiments/reproduce_table1.py` of this checkout (the one this package lives in), run
as a user runs it, in a process of its own.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any, Mapping, Sequence

from hieramas_jax.bench.results import existing_entry, load_average, machine, publish
from hieramas_jax.errors import UserError
from hieramas_jax.experiment import profile
from hieramas_jax.experiment.provenance import provenance
from hieramas_jax.paths import REPO_DIR
from hieramas_jax.report.paper import TABLE1_METHODS

KEY = "table1"
REPRODUCE = REPO_DIR / "experiments" / "reproduce_table1.py"
# The suite's own recipe (beyond the paper): timed apart from the published-recipe table.
SUITE_RECIPE_ROW = "hieramas_total_cost"
# Issue 29's goals for the whole command and issue 20's for the published-recipe rows, on 2 cores.
GOALS = {"table": {"cold_s": 600, "warm_s": 60}, "published": {"cold_s": 600, "warm_s": 60},
         "suite_recipe_row": None, "table_jax_encoder": {"cold_s": 600, "warm_s": 60}}
# Segments that time the whole command (no method flag), the first as the user types it.
WHOLE_TABLE = ("table", "table_jax_encoder")
NOTE = ("cells run concurrently, so a table's wall is its slowest cell's fit plus evaluation; cpu_s counts "
        "this benchmark's children (the runner process, the sim process, sandboxes); other load on the "
        "machine slows every figure; each segment carries the scope and provenance of the run that "
        "timed it")


def _run(args: list[str], env: dict[str, str], profile_to: pathlib.Path | None = None) -> dict:
  """One reproduce_table1.py process; wall, CPU (its own and its children's) and its last line; with
  `profile_to`, the process profiles itself there (`experiment.profile`) and the profile is returned too."""
  if profile_to is not None:
    env = {**env, profile.ENV: str(profile_to)}
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  t0 = time.monotonic()
  proc = subprocess.run([sys.executable, str(REPRODUCE), *args], capture_output=True, text=True, env=env,
                        cwd=REPO_DIR, check=False)
  wall = time.monotonic() - t0
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  if proc.returncode != 0:
    raise RuntimeError(f"reproduce_table1.py failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
  timed = {"wall_s": round(wall, 1), "cpu_s": round((after.ru_utime - before.ru_utime)
                                                    + (after.ru_stime - before.ru_stime), 1),
           "stdout": summary_line(proc.stdout)}
  if profile_to is not None:
    timed["profile"] = json.loads(profile_to.read_text())
  return timed


def _table_file(out_dir: pathlib.Path) -> pathlib.Path:
  """The Table 1 file a run wrote: table1.json, or a limited run's table1_limit...json (not table11)."""
  found = [p for p in out_dir.glob("table1*.json") if p.name == "table1.json" or p.name.startswith("table1_")]
  if len(found) != 1:
    raise RuntimeError(f"expected one Table 1 file in {out_dir}, found {sorted(p.name for p in found)}")
  return found[0]


def breakdown(prof: Mapping[str, Any], stats: Mapping[str, Any]) -> dict[str, Any]:
  """A run's profile in the terms issue 29 asks for: runner CPU per call, sim CPU per call made, grading,
  embedding, JAX, W&B (seconds of CPU, from `experiment.profile`), beside the raw profile."""
  if "unavailable" in prof:
    return {"unavailable": prof["unavailable"]}
  proc, kids = prof["process"], prof["children"]
  calls = stats["test_calls"] + stats["training_calls"]
  made = calls - stats["test_calls_replayed"] - stats["training_calls_replayed"]
  per_call = lambda s, n: round(1e6 * s / n, 1) if n else None  # pylint: disable=unnecessary-lambda-assignment
  sim = kids.get("sim server", 0.0)
  grading = (proc.get("grading", 0.0) + kids.get("math-verify worker", 0.0) + kids.get("HumanEval+ sandboxes", 0.0)
             + kids.get("short-lived children no tick saw", 0.0))
  return {
      "calls": calls, "calls_made": made,
      "runner_cpu_s": prof["process_cpu_s"], "runner_cpu_us_per_call": per_call(prof["process_cpu_s"], calls),
      "sim_cpu_s": round(sim, 2), "sim_cpu_us_per_call_made": per_call(sim, made),
      "response_cache_lookups_cpu_s": proc.get("response cache lookups", 0.0),
      "llm_client_cpu_s": proc.get("LLM client (requests, pricing)", 0.0),
      "grading_cpu_s": round(grading, 2),
      "embedding_cpu_s": proc.get("embedding (encoder)", 0.0),
      "jax_cpu_s": round(proc.get("JAX (tracing, compiling, steps)", 0.0) + proc.get("unattributed", 0.0), 2),
      "wandb_cpu_s": proc.get("W&B", 0.0),
      "profiler_cpu_s": proc.get("profiler", 0.0),
      "raw": dict(prof),
  }


def summary_line(stdout: str) -> str:
  """The run's last line without the files it wrote: they lie in a temporary directory, and no machine's
  absolute path belongs in a committed result."""
  last = stdout.strip().splitlines()[-1] if stdout.strip() else ""
  return last.split("; wrote ")[0]


def _table_stats(out_dir: pathlib.Path) -> dict:
  """Cells, calls made and replayed, and the slowest fits and evaluations of the table a run wrote."""
  record = json.loads(_table_file(out_dir).read_text())
  cells = record["cells"].values()
  slowest_fit = sorted(cells, key=lambda c: -c["timing"]["fit_or_load_s"])[:5]
  slowest_eval = sorted(cells, key=lambda c: -c["timing"]["evaluate_s"])[:5]
  test_calls = sum(c["n_calls"] for c in cells)
  test_cached = sum(c["cached_calls"] for c in cells)
  train_calls = sum((c["training"] or {}).get("calls", 0) for c in cells)
  train_cached = sum((c["training"] or {}).get("cached_calls", 0) for c in cells)
  return {"cells": len(record["cells"]), "table_wall_s": record["wall_s"],
          "test_calls": test_calls, "test_calls_replayed": test_cached,
          "training_calls": train_calls, "training_calls_replayed": train_cached,
          "slowest_fits": [{"cell": f"{c['label']}|{c['benchmark']}|{c['pool']}", "s": c["timing"]["fit_or_load_s"]}
                           for c in slowest_fit],
          "slowest_evaluations": [{"cell": f"{c['label']}|{c['benchmark']}|{c['pool']}", "s": c["timing"]["evaluate_s"]}
                                  for c in slowest_eval]}


def _dominates(run_: dict) -> str:
  fit, ev = run_["slowest_fits"][0], run_["slowest_evaluations"][0]
  return (f"slowest fit {fit['cell']} {fit['s']:.0f} s and slowest evaluation {ev['cell']} {ev['s']:.0f} s of a "
          f"{run_['table_wall_s']:.0f} s table")


def segment_methods(segment: str, methods: Sequence[str] | None) -> list[str]:
  """The methods a segment runs: every row (`table`), the published table (reproduce_table1.py's rows less
  the suite-recipe row) or the suite-recipe row alone; `methods` replaces the first two's."""
  if segment in WHOLE_TABLE:
    return list(methods) if methods else list(TABLE1_METHODS)
  if segment == "suite_recipe_row":
    return [SUITE_RECIPE_ROW]
  if methods:
    return list(methods)
  return [m for m in TABLE1_METHODS if m != SUITE_RECIPE_ROW]


def _time_segment(segment: str, work: pathlib.Path, *, limit: int | None, train_limit: int | None,
                  methods: Sequence[str] | None, method_option: Sequence[str]) -> dict:
  """Cold, warm and rerun of one segment in its own cache directory."""
  seg = work / segment
  env = dict(os.environ, HIERAMAS_CACHE_DIR=str(seg / "cache"), PYTHONPATH=str(REPO_DIR), WANDB_MODE="offline")
  run_methods = segment_methods(segment, methods)
  common = ["--progress=false", f"--out_dir={seg / 'out'}"]
  if segment not in WHOLE_TABLE or methods:  # the whole table is timed as the user types it: no method flag
    common.append(f"--methods={','.join(run_methods)}")
  if limit:
    common.append(f"--limit={limit}")
  if train_limit:
    common.append(f"--train_limit={train_limit}")
  common += [f"--method_option={o}" for o in method_option]
  if segment == "table_jax_encoder":
    common += [f"--method_option={o}" for o in encoder_options(run_methods, "jax")]
  load_before = load_average()[0]
  cold = _run(common + [f"--run_root={seg / 'runs-cold'}"], env, seg / "profile-cold.json")
  cold.update(_table_stats(seg / "out"))
  cold["profile"] = breakdown(cold["profile"], cold)
  warm = _run(common + [f"--run_root={seg / 'runs-warm'}"], env, seg / "profile-warm.json")
  warm.update(_table_stats(seg / "out"))
  warm["profile"] = breakdown(warm["profile"], warm)
  rerun = _run(common + [f"--run_root={seg / 'runs-warm'}"], env)
  goal = GOALS[segment]
  full = not (limit or train_limit or methods or method_option)
  return {
      "methods": run_methods,
      "cold_s": cold["wall_s"], "warm_s": warm["wall_s"], "rerun_s": rerun["wall_s"],
      "goal_cold_s": goal and goal["cold_s"], "goal_warm_s": goal and goal["warm_s"],
      "met": (bool(cold["wall_s"] <= goal["cold_s"] and warm["wall_s"] <= goal["warm_s"])
              if goal and full else None),
      "calls": {"cold_made": cold["test_calls"] + cold["training_calls"] - cold["test_calls_replayed"]
                - cold["training_calls_replayed"],
                "cold_total": cold["test_calls"] + cold["training_calls"],
                "warm_replayed": warm["test_calls_replayed"] + warm["training_calls_replayed"],
                "warm_total": warm["test_calls"] + warm["training_calls"]},
      "cold": cold, "warm": warm, "rerun": rerun,
      "what_dominates": {"cold": _dominates(cold), "warm": _dominates(warm)},
      "load_average_1m": {"before": load_before, "after": load_average()[0]},
  }


def encoder_options(methods: Sequence[str], backend: str) -> list[str]:
  """`METHOD.encoder=<bundled model>:<backend>` for each of `methods` that has a sentence encoder option."""
  # pylint: disable=import-outside-toplevel
  from hieramas_jax.learn.encoder import DEFAULT_MODEL
  from hieramas_jax.methods.registry import make_method
  return [f"{m}.encoder={DEFAULT_MODEL}:{backend}" for m in methods
          if "encoder" in make_method(m, benchmark="math", pool="gpt-5-mini").describe()]


def kept_segments(old: Mapping[str, Any], timed: Sequence[str]) -> dict:
  """The segments of an existing `table1` entry that this run does not time, each with its own scope and
  provenance (an entry written before segments carried their own keeps its top-level ones on each), so
  timing one segment never drops another's figures."""
  return {seg: {"scope": old.get("scope"), "provenance": old.get("provenance"), **old[seg]}
          for seg in GOALS if seg in old and seg not in timed}


def run(*, limit: int | None, train_limit: int | None, methods: Sequence[str] | None, segments: Sequence[str],
        method_option: Sequence[str], out: str, work_dir: str | None) -> dict:
  """Times `segments` and writes key `table1` of `out`, keeping the segments this run does not time.

  The cold caches and run roots go under `work_dir`, or a new temporary directory.
  """
  unknown = sorted(set(segments) - set(GOALS))
  if unknown:
    raise UserError(f"unknown segment(s) {', '.join(unknown)}; known: {', '.join(GOALS)}")
  logging.getLogger().setLevel(logging.INFO)
  work = pathlib.Path(work_dir or tempfile.mkdtemp(prefix="bench-table1-"))
  scope = {"limit": limit, "train_limit": train_limit, "methods": methods, "method_option": method_option,
           "segments": segments}
  prov = provenance(seed=0, benchmarks=("humaneval_plus", "math", "mmlu_redux"), flags=scope, backend="sim")
  entry = kept_segments(existing_entry(out, KEY), segments)
  for seg in segments:
    entry[seg] = {**_time_segment(seg, work, limit=limit, train_limit=train_limit, methods=methods,
                                  method_option=method_option), "scope": scope, "provenance": prov}
  entry.update({"note": NOTE, "machine": {"cpu_count": os.cpu_count()}})
  publish(out, KEY, entry)
  print("; ".join(f"{seg}: cold {entry[seg]['cold_s']} s, warm {entry[seg]['warm_s']} s, "
                  f"rerun {entry[seg]['rerun_s']} s" for seg in segments) + f" -> {out} (key table1)")
  return entry


INSTALL_KEY = "install"


def time_install(*, out: str, work_dir: str | None) -> dict:
  """`make install` on a fresh clone of this repository's HEAD, timed as a new user meets it before
  `make reproduce-table1` (issue 29: "install apart, measured and reported too"); writes key `install`.

  The clone gets its own `.venv`; pip still reads this machine's download cache (its size is recorded), so
  a machine that has never downloaded the wheels adds their download time on top.
  """
  work = pathlib.Path(work_dir or tempfile.mkdtemp(prefix="bench-install-"))
  clone = work / "clone"
  if clone.exists():
    raise UserError(f"{clone} exists: give --work_dir a new directory (the install is timed on a fresh clone)")
  subprocess.run(["git", "clone", "--quiet", str(REPO_DIR), str(clone)], check=True)
  commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True,
                          check=True).stdout.strip()
  env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
  load_before = load_average()
  t0 = time.monotonic()
  proc = subprocess.run(["make", "install"], cwd=clone, capture_output=True, text=True, env=env, check=False)
  wall = time.monotonic() - t0
  if proc.returncode != 0:
    raise RuntimeError(f"make install failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
  size_mb = lambda d: round(sum(f.stat().st_size for f in d.rglob("*") if f.is_file()) / 2**20) \
      if d.is_dir() else 0  # pylint: disable=unnecessary-lambda-assignment
  # Where pip found wheels without downloading them: its cache and any local wheel directories (sizes only:
  # a machine's paths stay out of results).
  links = [pathlib.Path(d) for d in os.environ.get("PIP_FIND_LINKS", "").split() if d and "://" not in d]
  entry = {"wall_s": round(wall, 1), "commit": commit,
           "pip_download_cache_mb": size_mb(pathlib.Path.home() / ".cache" / "pip"),
           "local_wheel_dirs_mb": sum(size_mb(d) for d in links),
           "machine": machine(load_before),
           "note": "make install in a fresh clone (its own .venv, bubblewrap and the report tools already on the "
                   "machine); pip takes what it can from its download cache and the local wheel directories "
                   "(PIP_FIND_LINKS), so a machine without them adds the wheels' download",
           "provenance": provenance(seed=None, flags={"install": True})}
  publish(out, INSTALL_KEY, entry)
  print(f"make install on a fresh clone of {commit[:12]}: {entry['wall_s']} s -> {out} (key {INSTALL_KEY})")
  return entry


SCALING_KEY = "table1_scaling"
# The executors timed, "process" or "ray:<workers>[:<cells per CPU>]": one process, then Ray on 1 and 2 cores.
SCALING_RUNS = ("process", "ray:1", "ray:2")


def parse_scaling_run(text: str) -> dict[str, Any]:
  """"ray:2:4" -> {"executor": "ray", "workers": 2, "cells_per_cpu": 4}; "process" -> its executor alone."""
  parts = text.split(":")
  try:
    if parts[0] == "process" and len(parts) == 1:
      return {"executor": "process", "workers": None, "cells_per_cpu": None}
    if parts[0] == "ray" and len(parts) in (2, 3):
      return {"executor": "ray", "workers": int(parts[1]), "cells_per_cpu": int(parts[2]) if len(parts) == 3 else 1}
  except ValueError:
    pass
  raise UserError(f"--scaling_runs: {text!r} is not process or ray:<workers>[:<cells per CPU>]")


def parse_seed_counts(texts: Sequence[str]) -> list[int]:
  """["1", "3"] -> [1, 3]; anything but whole numbers >= 1 is one clear error."""
  if not texts or not all(s.strip().isdigit() and int(s) >= 1 for s in texts):
    raise UserError(f"--scaling_seeds: numbers of seeds >= 1, got {list(texts)}")
  return [int(s) for s in texts]


def seed0_digest(cells: Mapping[str, Any]) -> str:
  """sha256 of the seed-0 cells' accuracy, cost and per-query outcomes: what every scaling run must agree on
  whatever its executor or number of seeds (a one-seed table's digest is that of all its cells, as before)."""
  return hashlib.sha256(json.dumps({k: (c["accuracy"], c["cost_usd"], c["outcomes"]) for k, c in cells.items()
                                    if c["seed"] == 0}, sort_keys=True).encode()).hexdigest()


def run_scaling(*, limit: int | None, train_limit: int | None, methods: Sequence[str] | None,
                method_option: Sequence[str], out: str, work_dir: str | None,
                runs_wanted: Sequence[str] = SCALING_RUNS, seed_counts: Sequence[int] = (1,)) -> dict:
  """How a table's cold wall time scales with the executor, its workers and the number of seeds (issue 29):
  the same table, each run from its own cold cache and run root, timed as a user runs it; writes key
  `table1_scaling`, keeping the runs an earlier call timed on the same scope (another executor or seed count).

  Each executor in `runs_wanted` is timed at every count in `seed_counts` (n: `--seeds=0,...,n-1`, each seed an
  independent simulated world, so n seeds are n times the calls). Every run's seed-0 cells must be the same
  (accuracy, cost and per-query outcomes); `same_table` says whether they are, over every run in the entry.
  """
  logging.getLogger().setLevel(logging.INFO)
  wanted = [{**parse_scaling_run(r), "seeds": n} for r in runs_wanted for n in seed_counts]
  work = pathlib.Path(work_dir or tempfile.mkdtemp(prefix="bench-scaling-"))
  scope = {"limit": limit, "train_limit": train_limit, "methods": methods, "method_option": method_option}
  old = existing_entry(out, SCALING_KEY)
  # A run timed before seeds were a dimension ran seed 0 alone.
  ident = lambda r: (r["executor"], r["workers"], r.get("cells_per_cpu"), r.get("seeds", 1))  # pylint: disable=unnecessary-lambda-assignment
  kept = [r for r in old.get("runs", []) if old.get("scope") == scope and ident(r) not in {ident(w) for w in wanted}]
  load_before = load_average()
  runs = []
  for run_ in wanted:
    name = "-".join(str(v) for v in ident(run_)[:3] if v is not None) + f"-seeds{run_['seeds']}"
    where = work / name
    env = dict(os.environ, HIERAMAS_CACHE_DIR=str(where / "cache"), PYTHONPATH=str(REPO_DIR), WANDB_MODE="offline")
    args = ["--progress=false", f"--out_dir={where / 'out'}", f"--run_root={where / 'runs'}",
            f"--methods={','.join(segment_methods('published', methods))}", f"--executor={run_['executor']}",
            f"--seeds={','.join(str(s) for s in range(run_['seeds']))}"]
    args += [f"--limit={limit}"] * bool(limit) + [f"--train_limit={train_limit}"] * bool(train_limit)
    if run_["executor"] == "ray":
      args += [f"--ray_workers={run_['workers']}", f"--ray_cells_per_cpu={run_['cells_per_cpu']}"]
    args += [f"--method_option={o}" for o in method_option]
    timed = _run(args, env)
    record = json.loads(_table_file(where / "out").read_text())
    table_sha256 = seed0_digest(record["cells"])
    runs.append({**run_, **timed, **_table_stats(where / "out"), "table_sha256": table_sha256,
                 "load_average_1m_after": load_average()[0]})
  all_runs = kept + runs
  # Runs an earlier call timed without a table digest count by that call's own same_table verdict.
  same = len({r["table_sha256"] for r in all_runs if "table_sha256" in r}) == 1 and (
      old.get("same_table", False) if any("table_sha256" not in r for r in kept) else True)
  entry = {"runs": all_runs, "same_table": same, "scope": scope,
           "note": "cold (fresh caches and run roots) each; wall_s is the command as a user runs it (Ray's start "
                   "included); cpu_s counts the benchmark's children (Ray's workers are the raylet's, so a Ray run's "
                   "CPU is not all counted); table_sha256: accuracy, cost and outcomes of every cell; other load on "
                   "the machine slows every figure",
           "machine": machine(load_before),
           "provenance": provenance(seed=0, benchmarks=("humaneval_plus", "math", "mmlu_redux"), flags=scope,
                                    backend="sim")}
  publish(out, SCALING_KEY, entry)
  print("; ".join(f"{r['executor']} {r['workers'] or ''} {r.get('cells_per_cpu') or ''} x{r.get('seeds', 1)} seeds: "
                  f"{r['wall_s']} s" for r in all_runs) + f"; same table: {entry['same_table']} -> {out} (key {SCALING_KEY})")
  return entry
