"""The one entry-point body: every program in experiments/ and launch/ is `cli.run(main)`.

What each program would otherwise repeat lives here: absl flag parsing (a bad flag is one `error:`
line), no positional arguments, the console quieted unless --verbose, the persistent JAX compile
cache, the backends of a run (one per seed), and the one place user errors are caught: a
`hieramas_jax.errors.UserError` anywhere below prints one `error:` line per problem to stderr and
exits 2; any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import re
import sys
import urllib.parse
from typing import Any, AsyncIterator, Callable, Iterable, Mapping

from hieramas_jax import aio
from hieramas_jax.errors import UserError
from hieramas_jax.experiment import profile
from hieramas_jax.experiment.console import quiet_console
from hieramas_jax.paths import cache_dir

EXIT_USER_ERROR = 2


def run_or_exit(fn: Callable[[], Any]) -> Any:
  """Calls `fn`; on a `UserError` prints `error: <message>` (one line per problem) to stderr and exits 2; on
  Ctrl-C one line and exits 130."""
  try:
    return fn()
  except KeyboardInterrupt:  # Ctrl-C: one line, status 130, no traceback (see aio.exit_interrupted)
    aio.exit_interrupted()
  except UserError as e:
    logging.shutdown()
    for problem in getattr(e, "problems", None) or [e]:  # a table's plan check names every conflict, one line each
      print(f"error: {problem}", file=sys.stderr, flush=True)
    sys.exit(EXIT_USER_ERROR)


def parse_flags_or_exit(argv: list[str]) -> list[str]:
  """absl `flags_parser` for `app.run`: a malformed or unknown flag is one `error:` line, exit 2.

  absl's own parser prints a FATAL line plus a help hint and exits 1; every other user mistake in
  the suite exits 2 with one line, so flags do the same.
  """
  from absl import flags  # pylint: disable=import-outside-toplevel
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    print(f"error: {e}", file=sys.stderr, flush=True)
    sys.exit(EXIT_USER_ERROR)


# Flags that name a directory the program writes under: checked before any work (`check_output_dirs`).
OUTPUT_DIR_FLAGS = ("out_dir", "run_root", "work_dir")


class OutputDirError(UserError):
  """An output directory flag names a file or a place the program cannot write: said before any work."""

  def __init__(self, problems: list[str]):
    super().__init__("\n".join(problems))
    self.problems = problems


def output_dir_problems(named: Mapping[str, Any]) -> list[str]:
  """Why each named directory cannot be written under (empty: all can); creates nothing.

  Why: a table's files are written after every cell ran, so an --out_dir naming a file used to fail
  half an hour late; an unwritable --run_root failed with a traceback.
  """
  problems = []
  for name, value in named.items():
    if value is None:
      continue
    path = pathlib.Path(value)
    if path.exists() and not path.is_dir():
      problems.append(f"--{name}={value} names a file, not a directory")
      continue
    existing = path if path.exists() else next((p for p in path.absolute().parents if p.exists()), None)
    if existing is None or not existing.is_dir():
      problems.append(f"--{name}={value}: {existing} is not a directory")
    elif not os.access(existing, os.W_OK | os.X_OK):
      problems.append(f"--{name}={value}: cannot write under {existing} (permission denied or read-only)")
  return problems


def check_output_dirs(flag_values: Any) -> None:
  """The program's output directory flags (OUTPUT_DIR_FLAGS) can be written under, or one UserError line each."""
  problems = output_dir_problems({n: flag_values[n].value for n in OUTPUT_DIR_FLAGS if n in flag_values})
  if problems:
    raise OutputDirError(problems)


def enable_jax_cache() -> None:
  """Compiled XLA executables persist across runs: a rerun, an ablation or a sweep point does not recompile."""
  import jax  # pylint: disable=import-outside-toplevel
  jax.config.update("jax_compilation_cache_dir", str(cache_dir() / "jax-compile"))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def run(main: Callable[[], Any], *, jax_cache: bool = False) -> None:
  """Runs `main()` as an absl program, inside the shared body (see the module docstring).

  Args:
    main: the program, flags already parsed (read them from `absl.flags.FLAGS`).
    jax_cache: turn the persistent JAX compile cache on first (programs that train).
  """
  from absl import app, flags  # pylint: disable=import-outside-toplevel

  def absl_main(argv: list[str]) -> None:
    def checked_main():
      if len(argv) > 1:  # one line, not absl's page of usage
        raise UserError(f"unexpected arguments: {' '.join(argv[1:])} (every option is a --flag; see --help)")
      from hieramas_jax.experiment.provenance import require_git  # pylint: disable=import-outside-toplevel
      require_git()
      check_output_dirs(flags.FLAGS)
      if jax_cache:
        enable_jax_cache()
      with profile.from_env():  # HIERAMAS_PROFILE=<file>: where the CPU went (bench_table1.py sets it)
        return main()

    if "verbose" in flags.FLAGS:
      quiet_console(flags.FLAGS.verbose)
    route_results_off_sim(flags.FLAGS)
    run_or_exit(checked_main)

  app.run(absl_main, flags_parser=parse_flags_or_exit)


@contextlib.asynccontextmanager
async def open_backends(flag_values: Any, seeds: Iterable[int], **kwargs: Any) -> AsyncIterator[dict[int, Any]]:
  """One open backend per seed (each seed is its own simulated world on the sim); `kwargs` go to `open_backend`."""
  # Imported here, as in run_spec: programs that open no backend (the report) stay light.
  from hieramas_jax.experiment.backend import open_backend  # pylint: disable=import-outside-toplevel
  async with contextlib.AsyncExitStack() as stack:
    yield {s: await stack.enter_async_context(open_backend(flag_values, seed=s, **kwargs)) for s in seeds}


def run_spec(spec: Any, flag_values: Any, *, run_root: str, flags: Mapping[str, Any], max_queries: int,
             progress: bool, use_wandb: bool, sim_process: bool, backend_flags: Any = None,
             needed_models: bool = True, executor: str = "process", ray_address: str | None = None,
             ray_workers: int | None = None, ray_cells_per_cpu: int = 1) -> dict[str, Any]:
  """Opens the spec's backends from the shared backend flags and runs the table; returns its record.

  Args:
    spec: what to run (a `spec.TableSpec`).
    flag_values: the program's flags (the backend flags are read from them unless `backend_flags`).
    run_root, flags, max_queries, progress, use_wandb: as `runner.run_table`.
    sim_process: serve the embedded sim from its own process.
    backend_flags: backend flags to use instead of `flag_values` (a sim profile per run).
    needed_models: check only the spec's pools' models at a real endpoint (else every mapped model).
    executor: "process" (every cell in this process's event loop) or "ray" (each cell a Ray task:
      `experiment.ray_executor`, on a local cluster of `ray_workers` cores or the one at `ray_address`,
      `ray_cells_per_cpu` cells at once per CPU).
  """
  from hieramas_jax.experiment.backend import BACKEND_FLAG_NAMES, pool_models  # pylint: disable=import-outside-toplevel
  from hieramas_jax.experiment.runner import run_table  # pylint: disable=import-outside-toplevel

  if executor == "ray":
    from hieramas_jax.experiment.ray_executor import run_table_ray  # pylint: disable=import-outside-toplevel
    source = backend_flags if backend_flags is not None else flag_values
    return run_table_ray(spec, {n: getattr(source, n, None) for n in BACKEND_FLAG_NAMES}, run_root=run_root,
                         flags=flags, max_queries=max_queries, use_wandb=use_wandb, progress=progress,
                         address=ray_address, workers=ray_workers, cells_per_cpu=ray_cells_per_cpu)

  async def go():
    async with open_backends(backend_flags if backend_flags is not None else flag_values, spec.seeds,
                             sim_process=sim_process, ledger_dir=run_root,
                             **({"needed_models": pool_models(spec.pools)} if needed_models else {})) as backends:
      return await run_table(spec, backends, run_root=run_root, flags=flags, max_queries=max_queries,
                             progress=progress, use_wandb=use_wandb)
  return aio.run(go())


# Appended to every --run_root help whose entry point uses `default_run_root`.
LIMITED_ROOT_HELP = (" When not given, a run with limits uses the default root named by them (e.g. "
                     "runs/table1-limit3-train8).")


def default_run_root(flag_values: Any, spec: Any) -> str:
  """--run_root, or, when it was not given, the default root named by the run's limits.

  A quick look (`--limit=3 --train_limit=8`) then writes under `runs/table1-limit3-train8` and the full
  table under `runs/table1`: the two never share a run directory, so neither refuses the other.
  """
  run_root = flag_values["run_root"].value
  if not flag_values["run_root"].using_default_value:
    return run_root
  return run_root + spec.limits_suffix()


def refuse_cut_run(flag_values: Any, names: Iterable[str], *, out_flag: str, overwrites: str,
                   allowed: Mapping[str, Any] | None = None, suffix: str = "") -> None:
  """Refuses a cut-down run (any of `names` off its default) whose output would land on the committed
  full-size result (`out_flag` at its default): one error naming the flags, the file and the fix.

  Why: a quick check with the default output place replaced a committed result by a few queries'
  (calibration.json, bench.json, a one-method table1.json). Limited test/train/val splits are suffixed
  instead (`TableSpec.results_suffix`): a run passing its non-empty `suffix` writes its own file and is not
  refused. `allowed` lists values that are not a cut (Table 3's benchmark).
  """
  if suffix:
    return
  allowed = allowed or {}
  cut = [f"--{n}={','.join(map(str, v)) if isinstance(v, list) else v}" for n in names
         if (v := flag_values[n].value) != flag_values[n].default and v != allowed.get(n)]
  if cut and flag_values[out_flag].using_default_value:
    from hieramas_jax.experiment.spec import InvalidRunError  # pylint: disable=import-outside-toplevel
    raise InvalidRunError(f"a run cut by {' '.join(cut)} would overwrite {overwrites} (the full one): "
                          f"pass --{out_flag}=" + ("FILE" if out_flag == "out" else "DIR"))


def off_sim_results_name(pool_file: str | None, backend: str = "sim", base_url: str | None = None) -> str | None:
  """None for a run on the embedded sim; else the name its results are filed under: the pool file's stem
  (`openrouter_paper`), or the backend, with the host and port of a --base_url (`custom-10.0.0.2-8000`;
  an already-running sim's too, whose seed and version are unknown here)."""
  if pool_file:
    return pathlib.Path(pool_file).stem
  if backend == "sim" and not base_url:
    return None
  if not base_url:
    return backend
  netloc = urllib.parse.urlsplit(base_url).netloc or base_url
  return f"{backend}-" + re.sub(r"[^A-Za-z0-9._]+", "-", netloc).strip("-")


def route_results_off_sim(flag_values: Any) -> None:
  """A run off the embedded sim reads and writes results/<name>/ (`off_sim_results_name`) wherever it
  would read or write results/: every flag still at a default naming results/ or a file in it (--out_dir,
  the frontier's --table1) gets that default moved, so a flag given explicitly still wins and
  `refuse_cut_run` still sees a default.

  Why: results/ holds the committed simulated tables; the README's paid run
  (`reproduce_table1.py --pool_file=launch/pools/openrouter_paper.toml --max_usd=20`) replaced
  results/table1.json with its own. Now it writes results/openrouter_paper/table1.json, which
  `make_report --results=results/openrouter_paper` reads.
  """
  from hieramas_jax.paths import RESULTS_DIR  # pylint: disable=import-outside-toplevel
  if "backend" not in flag_values:
    return
  name = off_sim_results_name(flag_values["pool_file"].value, flag_values["backend"].value,
                              flag_values["base_url"].value)
  if not name:
    return
  for flag_name in flag_values.flag_values_dict():
    flag = flag_values[flag_name]
    default = pathlib.Path(flag.default) if isinstance(flag.default, str) and flag.default else None
    if flag.using_default_value and default is not None and RESULTS_DIR in (default, default.parent):
      flag_values.set_default(flag_name, str(RESULTS_DIR / name / default.relative_to(RESULTS_DIR)))


def selected_flags(flag_values: Any, names) -> dict[str, Any]:
  """The values of the named flags (for config.json and provenance; redacted there)."""
  return {n: flag_values[n].value for n in names if n in flag_values}
