"""Sweeps are data: a spec becomes one command per grid point, or a W&B grid sweep."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "launch"))
import sweep  # noqa: E402  pylint: disable=wrong-import-position


def _spec(tmp_path, obj) -> str:
  path = tmp_path / "spec.json"
  path.write_text(json.dumps(obj) if not isinstance(obj, str) else obj)
  return str(path)


def test_grid_points_and_commands_cover_the_product(tmp_path):
  spec = sweep.load_spec(_spec(tmp_path, {"name": "s", "program": "experiments/train_hieramas.py",
                                          "flags": {"benchmark": "math", "wandb": False},
                                          "grid": {"k_pool": [50, 200], "num_proposers": [2, 6]}}))
  points = sweep.grid_points(spec)
  assert points == [{"k_pool": 50, "num_proposers": 2}, {"k_pool": 50, "num_proposers": 6},
                    {"k_pool": 200, "num_proposers": 2}, {"k_pool": 200, "num_proposers": 6}]
  cmd = sweep.point_command(spec, points[1])
  assert cmd[:2] == ["python", "experiments/train_hieramas.py"]
  assert "--benchmark=math" in cmd and "--wandb=false" in cmd
  assert "--k_pool=50" in cmd and "--num_proposers=6" in cmd
  assert cmd[-1] == "--run_name=s/k_pool=50_num_proposers=6"


def test_wandb_sweep_config_lists_fixed_and_grid_parameters(tmp_path):
  spec = sweep.load_spec(_spec(tmp_path, {"name": "s", "program": "p.py", "flags": {"seed": 0},
                                          "grid": {"k_pool": [50, 500]}}))
  text = sweep.wandb_sweep_yaml(spec)
  assert "method: grid" in text and "program: p.py" in text
  assert "  k_pool:\n    values: [50, 500]" in text and "  seed:\n    value: 0" in text


@pytest.mark.parametrize("bad, message", [
    ("{not json", "malformed JSON"),
    ({"name": "s", "program": "p.py"}, "missing key 'grid'"),
    ({"name": "s", "program": "p.py", "grid": {"k": []}}, "non-empty lists"),
])
def test_bad_specs_give_one_clear_error_and_exit_2(tmp_path, bad, message):
  with pytest.raises(sweep.SweepSpecError, match=message):
    sweep.load_spec(_spec(tmp_path, bad))
  proc = subprocess.run([sys.executable, str(REPO / "launch" / "sweep.py"), f"--spec={_spec(tmp_path, bad)}"],
                        capture_output=True, text=True, check=False)
  assert proc.returncode == 2
  assert proc.stderr.strip().startswith("error:") and message.split("'")[0] in proc.stderr


def test_committed_sweep_specs_load():
  for path in sorted((REPO / "launch" / "sweeps").glob("*.json")):
    spec = sweep.load_spec(str(path))
    assert sweep.grid_points(spec)
