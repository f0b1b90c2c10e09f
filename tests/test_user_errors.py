"""One root of user-facing errors: every error an entry point reports as a user mistake is a `UserError`,
and the shared entry-point body prints it as one `error:` line and exits 2 (no traceback)."""

from __future__ import annotations

import pytest

from hieramas_jax.benchmarks.data import DataError, UnknownBenchmarkError
from hieramas_jax.benchmarks.sandbox import SandboxError
from hieramas_jax.errors import UserError
from hieramas_jax.experiment.cli import run_or_exit
from hieramas_jax.experiment.rundir import RunConfigMismatchError, StateError
from hieramas_jax.experiment.runner import TablePlanError
from hieramas_jax.experiment.spec import InvalidRunError
from hieramas_jax.learn.stage2 import Stage2Error
from hieramas_jax.llm.errors import LLMError
from hieramas_jax.llm.registry import UnknownModelError, UnknownPoolError
from hieramas_jax.mas.config import ConfigError
from hieramas_jax.mas.roles import UnknownRoleError
from hieramas_jax.methods.api import MethodError, UnknownMethodError
from hieramas_jax.methods.hieramas.config import HieraMASConfigError
from hieramas_jax.methods.hieramas.training import TrainingError
from hieramas_jax.methods.static_search.space import OracleError


@pytest.mark.parametrize("error", [
    MethodError("the method cannot run"), OracleError("search"), TrainingError("train"), Stage2Error("s2"),
    HieraMASConfigError("cfg"), InvalidRunError("flags"), RunConfigMismatchError("run dir"), StateError("state"),
    DataError("data"), LLMError("llm"), SandboxError("sandbox"),
    ConfigError("mas"), UnknownModelError("m"), UnknownPoolError("p"), UnknownBenchmarkError("b"),
    UnknownRoleError("r"), UnknownMethodError("x")], ids=lambda e: type(e).__name__)
def test_user_errors_print_one_line_and_exit_2(error, capsys, monkeypatch):
  monkeypatch.setattr("logging.shutdown", lambda: None)  # run_or_exit's own would close pytest's log handlers
  assert isinstance(error, UserError)

  def fail():
    raise error
  with pytest.raises(SystemExit) as caught:
    run_or_exit(fail)
  assert caught.value.code == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err


def test_a_table_plan_error_prints_one_line_per_problem_and_a_bug_keeps_its_traceback(capsys, monkeypatch):
  monkeypatch.setattr("logging.shutdown", lambda: None)

  def refuse():
    raise TablePlanError(["a conflicts", "b conflicts"])
  with pytest.raises(SystemExit):
    run_or_exit(refuse)
  assert capsys.readouterr().err.splitlines() == ["error: a conflicts", "error: b conflicts"]

  def bug():
    raise ZeroDivisionError("a bug")
  with pytest.raises(ZeroDivisionError):
    run_or_exit(bug)


@pytest.mark.parametrize("argv, message", [
    (["experiments/calibrate_sim.py", "--sections=single", "--n_items=200", "--wandb=false"],
     "error: a run cut by --sections=single --n_items=200 would overwrite results/calibration.json (the "
     "full one): pass --out_dir=DIR"),
    (["experiments/bench_table1.py", "--limit=5", "--train_limit=16"],
     "error: a run cut by --limit=5 --train_limit=16 would overwrite the table's timings in results/bench.json "
     "(the full one): pass --out=FILE"),
    (["experiments/reproduce_table1.py", "--methods=hieramas", "--wandb=false"],  # (--limit: a suffixed name)
     "error: a run cut by --methods=hieramas would overwrite results/table1.json (the full one): pass "
     "--out_dir=DIR"),
    # A subset of benchmarks, pools, methods, profiles or cost weights is not the committed full-size result.
    (["experiments/oracle_regret.py", "--benchmarks=math", "--wandb=false"],
     "error: a run cut by --benchmarks=math would overwrite results/regret.json (the full one): pass --out_dir=DIR"),
    (["experiments/sim_sensitivity.py", "--methods=sc_cot,debate", "--profiles=low,fitted", "--wandb=false"],
     "error: a run cut by --methods=sc_cot,debate --profiles=low,fitted would overwrite results/sim_sensitivity.json "
     "(the full one): pass --out_dir=DIR"),
    (["experiments/hieramas_frontier.py", "--pools=gpt-5-mini", "--ks=0,300"],
     "error: a run cut by --pools=gpt-5-mini --ks=0,300 would overwrite results/hieramas_frontier.json (the full one): "
     "pass --out_dir=DIR"),
    # Off the sim, results/ means results/<pool file stem>/ (cli.route_results_off_sim): checked before any call.
    (["experiments/reproduce_table1.py", "--pool_file=launch/pools/local_smoke.toml", "--methods=base",
      "--wandb=false"],
     "error: a run cut by --methods=base would overwrite results/local_smoke/table1.json (the full one): pass "
     "--out_dir=DIR"),
])
def test_a_cut_down_run_refuses_to_overwrite_the_committed_result(argv, message):
  import os, subprocess, sys  # pylint: disable=import-outside-toplevel,multiple-imports
  from hieramas_jax.paths import REPO_DIR  # pylint: disable=import-outside-toplevel
  def snapshot():
    return {p.name: p.stat().st_mtime_ns for p in (REPO_DIR / "results").glob("*.json")}
  before = snapshot()
  proc = subprocess.run([sys.executable, *argv], cwd=REPO_DIR, capture_output=True, text=True, check=False,
                        timeout=120, env={**os.environ, "PYTHONPATH": str(REPO_DIR)})
  assert proc.returncode == 2
  assert proc.stderr.strip() == message
  assert snapshot() == before  # nothing under results/ written
