"""Help and errors of the entry points: complete per-field help, one flag name per meaning, files 0644."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys

import pytest

from hieramas_jax import fileio
from hieramas_jax.methods.hieramas.config import HieraMASConfig
from hieramas_jax.paths import REPO_DIR


def _help(script: str) -> str:
  proc = subprocess.run([sys.executable, str(REPO_DIR / "experiments" / script), "--help"], capture_output=True,
                        text=True, check=False, env={**os.environ, "PYTHONPATH": str(REPO_DIR)})
  return proc.stdout + proc.stderr


def _flag_help(text: str) -> dict[str, str]:
  """--name -> its help text (continuation lines joined, defaults left out)."""
  out: dict[str, str] = {}
  for block in re.split(r"\n  --(?:\[no\])?", text)[1:]:
    name, _, rest = block.partition(":")
    out[name] = " ".join(line.strip() for line in rest.splitlines() if not line.strip().startswith("(")).strip()
  return out


def test_every_config_field_has_its_own_complete_help():
  helps = _flag_help(_help("train_hieramas.py"))
  fields = [f.name for f in dataclasses.fields(HieraMASConfig)]
  assert all(f in helps for f in fields)
  assert not [f for f in fields if "see HieraMASConfig" in helps[f]]
  # A continuation line holding "word:" no longer cuts the help short ...
  assert 'or "system" (the system-level reward;' in helps["activation_credit"]
  # ... and fields that shared one docstring line each say their own part.
  assert helps["stage1_steps"].startswith("REINFORCE updates of stage 1")
  assert helps["stage1_batch"].startswith("training queries per update")
  assert len({helps[f] for f in fields}) == len(fields)


def test_the_test_query_limit_is_limit_in_every_table_entry_point():
  for script in ("reproduce_table1.py", "train_hieramas.py", "oracle_regret.py", "hieramas_frontier.py",
                 "sim_sensitivity.py"):
    helps = _flag_help(_help(script))
    assert "limit" in helps and "test_limit" not in helps, script


def test_new_files_get_the_usual_mode_not_0600(tmp_path):
  path = tmp_path / "out.json"
  fileio.atomic_write_json(path, {"a": 1})
  assert path.stat().st_mode & 0o777 == 0o666 & ~fileio._UMASK  # pylint: disable=protected-access
  if fileio._UMASK == 0o022:  # pylint: disable=protected-access
    assert path.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("argv, out_dir, table1", [
    ([], "results", "results/table1.json"),                                  # the embedded sim: results/ itself
    (["--pool_file=launch/pools/openrouter_paper.toml"], "results/openrouter_paper",
     "results/openrouter_paper/table1.json"),
    (["--backend=openai"], "results/openai", "results/openai/table1.json"),
    (["--backend=custom", "--base_url=http://10.0.0.2:8000/v1"], "results/custom-10.0.0.2-8000",
     "results/custom-10.0.0.2-8000/table1.json"),
    (["--base_url=http://127.0.0.1:5555/v1"], "results/sim-127.0.0.1-5555",        # a sim whose seed is unknown
     "results/sim-127.0.0.1-5555/table1.json"),
    (["--pool_file=launch/pools/local_smoke.toml", "--out_dir=/tmp/x"], "/tmp/x",  # given: it wins
     "results/local_smoke/table1.json"),
])
def test_a_run_off_the_sim_reads_and_writes_results_under_its_own_name(argv, out_dir, table1):
  from absl import flags  # pylint: disable=import-outside-toplevel
  from hieramas_jax.experiment.cli import route_results_off_sim  # pylint: disable=import-outside-toplevel
  from hieramas_jax.llm.endpoint import define_backend_flags  # pylint: disable=import-outside-toplevel
  from hieramas_jax.paths import RESULTS_DIR  # pylint: disable=import-outside-toplevel
  fv = flags.FlagValues()
  define_backend_flags(fv)
  flags.DEFINE_string("out_dir", str(RESULTS_DIR), "", flag_values=fv)
  flags.DEFINE_string("table1", str(RESULTS_DIR / "table1.json"), "", flag_values=fv)
  flags.DEFINE_string("run_root", str(REPO_DIR / "runs" / "table1"), "", flag_values=fv)
  fv(["prog", *argv])
  route_results_off_sim(fv)
  assert fv.out_dir == (out_dir if out_dir.startswith("/") else str(REPO_DIR / out_dir))
  assert fv.table1 == str(REPO_DIR / table1)
  assert fv.run_root == str(REPO_DIR / "runs" / "table1")                      # not a results/ path: unmoved
  # A moved default is still a default: a cut run is still refused (`refuse_cut_run`).
  assert fv["out_dir"].using_default_value == ("--out_dir=/tmp/x" not in argv)
