"""Ray as the executor of a table's cells: each cell a Ray task, on every core of every machine of a cluster.

Why: a table's cells are independent (a cell's result is a function of its cell, its seed and the sim, which
is a pure function of the request and its seed), but one process runs them on about 1.4 cores and no more
machines can be added. Here the driver plans and checks every cell as `runner.run_table` does (run
directories, data hashes, --load_run, the run-directory locks: one error naming every conflict, before any
work), then submits one task per cell; each task runs its cell through `runner.run_table` itself, on a
one-cell spec (`cell_spec`), with a backend of its own: its own sim server (a thread of the worker) when
the backend is the sim, its own event loop, its own bound on queries in flight (--max_queries each), and it
takes the cell's run-directory lock (one writer per cell). The driver assembles the table record with
`runner.table_record`, so the table is the one the in-process runner makes (tests/test_ray_executor.py).

Where things live:
  * run directories: under --run_root, which every node must see at the same path (a shared filesystem
    when there are several machines: NFS, CephFS, Lustre; flock must work there for the lock);
  * response cache: each node's own (`paths.cache_dir()`, `HIERAMAS_CACHE_DIR`): the sim answers the same
    request with the same bytes on any node, so a per-node cache only saves a node's repeats. Merging
    caches across nodes, a cache actor and a shared rate limit are not built (each worker enforces the
    endpoint's concurrency alone: use one worker per endpoint key, or the sim);
  * --max_usd: one total over every worker, which reserves each attempt in the run root's spend ledger
    (`llm/ledger.py`, an sqlite file, so on several machines it needs a filesystem whose locks sqlite trusts);
  * the code: every node runs the same checkout at the same path (`PYTHONPATH` is set for the workers).

Resume: Ray retries a task whose worker died (`max_retries`); the retried cell resumes from its run directory
(finished fit, checkpoints, items.jsonl) exactly as a rerun does, and the kernel released the dead worker's
lock. A killed driver: rerun the command; finished cells are replayed from their run directories.

`ray.init()` with no address starts a local cluster on this machine's cores (`workers` caps them); an
address (`ray start --head` on one machine, `ray start --address=<head>:6379` on the others) joins it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import tempfile
import time
import types
from typing import Any, Mapping

from hieramas_jax import aio, isa
from hieramas_jax.errors import UserError
from hieramas_jax.experiment.spec import Cell, TableSpec
from hieramas_jax.paths import REPO_DIR

# Worker environment forwarded through Ray's runtime_env: the same code, pin, caches and W&B mode.
FORWARDED_ENV = (*isa.VARIABLES, isa.LEVEL_ENV, "HIERAMAS_CACHE_DIR", "WANDB_MODE", "WANDB_DIR", "HF_HUB_OFFLINE",
                 "TRANSFORMERS_OFFLINE")
# A worker that dies mid-cell (killed, out of memory, its node lost) is retried this often.
MAX_RETRIES = 3


class RayExecutorError(UserError):
  """Ray cannot start or join the cluster named (one line, exit 2)."""


def cell_spec(spec: TableSpec, cell: Cell) -> TableSpec:
  """The one-cell table of `cell`: its method, benchmark, pool and seed, with the spec's limits and options."""
  keep = lambda d: {k: v for k, v in d.items() if k == cell.method}  # pylint: disable=unnecessary-lambda-assignment
  return dataclasses.replace(spec, methods=(cell.method,), benchmarks=(cell.benchmark,), pools=(cell.pool,),
                             seeds=(cell.seed,), method_options=keep(spec.method_options),
                             load_from=keep(spec.load_from),
                             train_limit={b: n for b, n in spec.train_limit.items() if b == cell.benchmark})


def run_cell_task(spec: TableSpec, backend_flags: Mapping[str, Any], run_root: str, flags: Mapping[str, Any],
                  max_queries: int, use_wandb: bool) -> dict[str, Any]:
  """A Ray worker's body: the one-cell `spec` through `runner.run_table`, on this worker's own backend."""
  # pylint: disable=import-outside-toplevel
  from hieramas_jax.experiment.backend import open_backend
  from hieramas_jax.experiment.runner import run_table
  seed = spec.seeds[0]

  async def go():
    # needed_models=(): the driver's preflight already checked the endpoints; a worker sends nothing extra.
    # ledger_dir: every worker reserves against the run root's one spend ledger (llm/ledger.py), so
    # --max_usd caps the cluster, not each worker.
    async with open_backend(types.SimpleNamespace(**backend_flags), seed=seed, needed_models=(),
                            ledger_dir=run_root) as backend:
      with tempfile.TemporaryDirectory() as tmp:
        table = await run_table(spec, {seed: backend}, run_root=run_root, flags=flags, max_queries=max_queries,
                                progress=False, use_wandb=use_wandb, progress_path=pathlib.Path(tmp) / "progress.json")
      return {"cells": table["cells"], "backend": backend.describe(), "label": backend.label, "pid": os.getpid(),
              "node": os.uname().nodename}
  return aio.run(go())


def init_ray(address: str | None, workers: int | None) -> Any:
  """`ray.init` for a run: a local cluster on this machine of `workers` CPUs (default every core), or the
  existing cluster at `address`. Workers get this checkout on PYTHONPATH and the pin."""
  import ray  # pylint: disable=import-outside-toplevel
  env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
  env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_DIR), os.environ.get("PYTHONPATH", "")) if p)
  if ray.is_initialized():
    return ray
  kwargs: dict[str, Any] = {"runtime_env": {"env_vars": env}, "logging_level": "ERROR", "log_to_driver": False}
  if address:
    kwargs["address"] = address
  else:
    kwargs.update(num_cpus=workers or os.cpu_count(), include_dashboard=False)
  try:
    ray.init(**kwargs)
  except (ConnectionError, RuntimeError, ValueError) as e:
    raise RayExecutorError(f"cannot {'join the Ray cluster at ' + address if address else 'start Ray'}: "
                           f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
  return ray


async def plan_and_check(spec: TableSpec, backend_flags: Mapping[str, Any], run_root: str) -> tuple[dict, set, Any,
                                                                                                    dict]:
  """The driver's checks before any cell starts (the in-process runner's): backends opened once (the
  endpoints' preflight), every cell planned and checked, every lock free. Returns each seed's endpoint
  description, the backends' labels, the table root and each cell's number of test queries."""
  # pylint: disable=import-outside-toplevel
  from hieramas_jax.experiment.backend import open_backend, pool_models
  from hieramas_jax.experiment.runner import lock_plans, plan_table, table_root
  async with contextlib.AsyncExitStack() as stack:
    backends = {s: await stack.enter_async_context(open_backend(types.SimpleNamespace(**backend_flags), seed=s,
                                                                needed_models=pool_models(spec.pools),
                                                                ledger_dir=run_root))
                for s in spec.seeds}
    root = table_root(run_root, backends[spec.seeds[0]].endpoint.name)
    plans = plan_table(spec, backends, root)
    with lock_plans(plans):  # a cell another process writes is named now, not when its task starts
      pass
    return ({s: b.describe() for s, b in backends.items()}, {b.label for b in backends.values()}, root,
            {p.cell.key: len(p.items.test) for p in plans})


def run_table_ray(spec: TableSpec, backend_flags: Mapping[str, Any], *, run_root: str, flags: Mapping[str, Any],
                  max_queries: int, use_wandb: bool = False, progress: bool = True, address: str | None = None,
                  workers: int | None = None, cells_per_cpu: int = 1, command: str | None = None) -> dict[str, Any]:
  """Runs every cell of `spec` as a Ray task; returns the table record `runner.run_table` would.

  Args:
    spec: what to run.
    backend_flags: the backend flags' values (`backend.BACKEND_FLAG_NAMES`), as a worker rebuilds them.
    run_root, flags, max_queries, use_wandb, progress, command: as `runner.run_table` (max_queries per worker).
    address: a running cluster to join (None: start a local one).
    workers: with no address, the CPUs of the local cluster (default: every core).
    cells_per_cpu: cells (tasks) at once per CPU. A cell mostly waits on its calls, so one per CPU leaves
      the CPU idle: measured on 2 shared cores, 18 small cells took 798 s on one worker against 77 s in one
      process, whose event loop overlaps every cell; 4 per CPU on 2 workers still took 479 s against 72 s
      (results/bench.json key table1_scaling). Each cell is a worker process (torch, jax: about 1 GB).

  Raises:
    The first failed cell's own error (a UserError stays one line), after every other cell finished.
  """
  # pylint: disable=import-outside-toplevel
  from hieramas_jax.experiment.progress import TableProgress
  from hieramas_jax.experiment.rundir import PROGRESS_FILE
  from hieramas_jax.experiment.runner import table_record
  described, labels, root, totals = aio.run(plan_and_check(spec, backend_flags, run_root))
  import ray  # pylint: disable=import-outside-toplevel
  local = not ray.is_initialized() and address is None  # a cluster this run starts, and so stops
  init_ray(address, workers)
  task = ray.remote(num_cpus=1.0 / cells_per_cpu, max_retries=MAX_RETRIES)(run_cell_task)
  cells = spec.cells()
  started = time.monotonic()
  refs = {task.remote(cell_spec(spec, c), dict(backend_flags), str(run_root), dict(flags), max_queries, use_wandb): c
          for c in cells}
  table_progress = TableProgress(totals, root / spec.setting / PROGRESS_FILE, enabled=progress)
  results: dict[str, Any] = {}
  errors: list[tuple[Cell, BaseException]] = []
  try:
    for c in cells:
      table_progress.status(c.key, "submitted")
    pending = list(refs)
    while pending:
      done, pending = ray.wait(pending, num_returns=1)
      cell = refs[done[0]]
      try:
        out = ray.get(done[0])
      except ray.exceptions.RayTaskError as e:
        errors.append((cell, e.cause if isinstance(e.cause, BaseException) else e))
        table_progress.status(cell.key, "failed")
        continue
      results[cell.key] = out
      record = out["cells"][cell.key]
      table_progress.status(cell.key, "done", accuracy=round(record["accuracy"], 2))
  except BaseException:
    for ref in refs:  # Ctrl-C or a driver error: nothing left running on any worker
      ray.cancel(ref, force=True)
    if local:  # the local cluster this run started goes with it (Ctrl-C ends the process with os._exit,
      ray.shutdown()  # which skips Ray's own atexit shutdown)
    raise
  finally:
    table_progress.close()
  if errors:
    raise errors[0][1]
  return table_record(spec, described, labels, root=root, wall_s=time.monotonic() - started,
                      cells={c.key: results[c.key]["cells"][c.key] for c in cells}, flags=flags, command=command)
