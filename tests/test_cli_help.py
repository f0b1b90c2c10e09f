"""Help and errors of the entry points: complete per-field help, one flag name per meaning, files 0644."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys

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
