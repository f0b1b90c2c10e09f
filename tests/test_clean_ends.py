"""Clean ends: a second writer of a run directory, damaged state, bad output paths, a missing git, a stray
argument and Ctrl-C each end in one line (exit 2, or 130 for Ctrl-C), said before any work, no traceback."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from hieramas_jax.experiment.backend import Backend, sim_endpoint_name
from hieramas_jax.experiment.rundir import LOCK_FILE, RunDirLockedError, StateError, run_dir_lock
from hieramas_jax.experiment.runner import TablePlanError, run_table, table_root
from hieramas_jax.experiment.spec import TableSpec
from hieramas_jax.llm.client import LLMClient
from hieramas_jax.llm.endpoint import sim_endpoint
from hieramas_jax.methods.hieramas.method import HieraMASError
from hieramas_jax.methods.registry import make_method
from hieramas_jax.paths import REPO_DIR

PYTHON = sys.executable
TABLE1 = str(REPO_DIR / "experiments" / "reproduce_table1.py")
ENV = {**os.environ, "PYTHONPATH": str(REPO_DIR)}
# The smallest real table a subprocess can run: Base on 2 MATH queries (no training).
BASE_ARGS = ["--methods=base", "--benchmarks=math", "--pools=gpt-5-mini", "--limit=2", "--nowandb", "--noprogress",
             "--sim_process=false"]
HOLD = ("import sys, time\nfrom hieramas_jax.experiment.rundir import run_dir_lock\n"
        "with run_dir_lock(sys.argv[1]):\n  print('held', flush=True)\n  time.sleep(120)\n")


def _hold_lock(run_dir: pathlib.Path) -> subprocess.Popen:
  """Another process holding `run_dir`'s lock (as a second run writing the cell would)."""
  proc = subprocess.Popen([PYTHON, "-c", HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True, env=ENV)
  assert proc.stdout.readline().strip() == "held"
  return proc


def _spec(test: int = 2) -> TableSpec:
  return TableSpec(methods=("base",), benchmarks=("math",), pools=("gpt-5-mini",), setting="main", seeds=(0,),
                   test_limit=test)


async def _table(sim, run_root):
  endpoint = sim_endpoint(sim.base_url)
  async with LLMClient(endpoint) as client:
    return await run_table(_spec(), {0: Backend(client, endpoint, None)}, run_root=run_root, flags={},
                           max_queries=4, progress=False)


def _cell_dir(run_root: pathlib.Path, endpoint_name: str) -> pathlib.Path:
  return table_root(run_root, endpoint_name) / "main" / "seed0" / "gpt-5-mini" / "math" / "base"


def test_a_run_directory_has_one_writer_and_a_killed_holder_leaves_it_free(tmp_path):
  holder = _hold_lock(tmp_path / "cell")
  try:
    with pytest.raises(RunDirLockedError, match=rf"being written by another process \(pid {holder.pid} on "):
      with run_dir_lock(tmp_path / "cell"):
        pass
  finally:
    holder.kill()
    holder.wait()
  # The kernel drops a killed holder's lock: the file it left never blocks the resume.
  assert (tmp_path / "cell" / LOCK_FILE).exists()
  with run_dir_lock(tmp_path / "cell"):
    with pytest.raises(RunDirLockedError):  # the lock is per open file: a second taker in one process waits too
      with run_dir_lock(tmp_path / "cell"):
        pass


def test_a_table_refuses_a_cell_another_process_writes_before_any_cell_starts(session_sim, tmp_path):
  run_dir = _cell_dir(tmp_path / "runs", sim_endpoint(session_sim.base_url).name)
  holder = _hold_lock(run_dir)
  try:
    with pytest.raises(TablePlanError, match="being written by another process") as caught:
      asyncio.run(_table(session_sim, tmp_path / "runs"))
    assert len(caught.value.problems) == 1
    assert sorted(p.name for p in run_dir.iterdir()) == [LOCK_FILE]  # nothing written: no config.json
  finally:
    holder.kill()
    holder.wait()
  table = asyncio.run(_table(session_sim, tmp_path / "runs"))  # free again: the same table runs
  assert [c["n"] for c in table["cells"].values()] == [2]


def test_a_damaged_items_file_is_a_state_error_not_an_unbound_local(session_sim, tmp_path):
  asyncio.run(_table(session_sim, tmp_path / "runs"))
  items = _cell_dir(tmp_path / "runs", sim_endpoint(session_sim.base_url).name) / "items.jsonl"
  lines = items.read_text().splitlines()
  items.write_text("{torn\n" + "\n".join(lines) + "\n")  # a bad first line: not a kill's torn tail
  with pytest.raises(StateError, match=r"items.jsonl:1: not a JSON record"):
    asyncio.run(_table(session_sim, tmp_path / "runs"))


@pytest.mark.parametrize("text", ['{"k_pool": ', "[1, 2]", '{"no_such_field": 1}', '"a string"'])
def test_a_damaged_hieramas_state_config_is_one_method_error(tmp_path, text):
  (tmp_path / "hieramas.json").write_text(text)
  method = make_method("hieramas", benchmark="math", pool="gpt-5-mini", seed=0)
  with pytest.raises(HieraMASError, match=r"hieramas.json: not a HieraMAS config .*delete the cell's run directory") \
      as caught:
    method.load(tmp_path)
  assert "\n" not in str(caught.value)


def _start(args, tmp_path, **env) -> subprocess.Popen:
  return subprocess.Popen([PYTHON, TABLE1, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          cwd=tmp_path, env={**ENV, **env})


def test_bad_paths_a_missing_git_a_stray_argument_and_a_locked_cell_are_one_error_line_before_any_work(
    tmp_path):
  a_file = tmp_path / "a_file"
  a_file.write_text("not a directory\n")
  runs = tmp_path / "runs"
  run_dir = _cell_dir(runs, sim_endpoint_name(0))
  holder = _hold_lock(run_dir)
  cases = {
      "out_dir names a file": ([*BASE_ARGS, f"--out_dir={a_file}", f"--run_root={runs}"], {},
                               f"--out_dir={a_file} names a file, not a directory"),
      "run_root under a file": ([*BASE_ARGS, f"--out_dir={tmp_path / 'out'}", f"--run_root={a_file}/runs"], {},
                                f"--run_root={a_file}/runs: {a_file} is not a directory"),
      "stray positional": ([*BASE_ARGS, "math"], {}, "unexpected arguments: math"),
      "no git on PATH": ([*BASE_ARGS, f"--out_dir={tmp_path / 'out'}", f"--run_root={runs}"],
                         {"PATH": str(tmp_path / "empty")}, "git is not on PATH"),
      "a locked cell": ([*BASE_ARGS, f"--out_dir={tmp_path / 'out'}", f"--run_root={runs}"], {},
                        f"is being written by another process (pid {holder.pid} on "),
  }
  try:
    procs = {name: _start(args, tmp_path, **env) for name, (args, env, _) in cases.items()}
    results = {name: proc.communicate(timeout=240) + (proc.returncode,) for name, proc in procs.items()}
  finally:
    holder.kill()
    holder.wait()
  for name, (_, _, wanted) in cases.items():
    _, stderr, rc = results[name]
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert rc == 2 and len(errors) == 1 and wanted in errors[0], (name, stderr[-2000:])
    assert "Traceback" not in stderr and "USAGE" not in stderr, name
  assert not (tmp_path / "out").exists()  # nothing written
  assert sorted(p.name for p in run_dir.iterdir()) == [LOCK_FILE]


@pytest.mark.slow
def test_ctrl_c_ends_a_training_run_within_5_s_with_one_line_and_no_process_left(tmp_path):
  """SIGINT to the run's process group (what a terminal's Ctrl-C sends) while GDesigner trains."""
  runs = tmp_path / "runs"
  proc = subprocess.Popen(
      [PYTHON, TABLE1, "--methods=base,gdesigner", "--benchmarks=math", "--pools=gpt-5-mini", "--limit=20",
       "--train_limit=64", "--method_option=gdesigner.iterations=20", "--nowandb", "--noprogress",
       f"--out_dir={tmp_path / 'out'}", f"--run_root={runs}"],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, start_new_session=True,
      env={**ENV, "HIERAMAS_CACHE_DIR": str(tmp_path / "cache")},
      # A test runner may start us with SIGINT ignored (a background job); a terminal's program has it.
      preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
  deadline = time.monotonic() + 240
  while not any(runs.rglob("gdesigner/config.json")) and proc.poll() is None and time.monotonic() < deadline:
    time.sleep(0.2)
  time.sleep(3)  # inside the fit
  assert proc.poll() is None, proc.communicate()[1][-2000:]
  children = subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True).stdout.split()
  assert len(children) >= 2  # the run and its sim process
  sent = time.monotonic()
  os.killpg(proc.pid, signal.SIGINT)
  _, stderr = proc.communicate(timeout=30)
  took = time.monotonic() - sent
  assert took < 5.0 and proc.returncode == 130, (took, proc.returncode, stderr[-2000:])
  assert "Traceback" not in stderr
  assert stderr.strip().splitlines()[-1].startswith("interrupted: stopped; rerun the same command to resume")
  time.sleep(0.5)
  left = subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True).stdout.split()
  assert not left
  assert not any(runs.rglob("gdesigner/fit.json")) and not (tmp_path / "out").exists()
  summary = json.loads(next(runs.rglob("base/config.json")).read_text())
  assert summary["cell"]["method"] == "base"
