"""Every committed flag set parses against the flags of the program it is written for.

The ablation flag files (experiments/ablations/*.flags, run by `make results` through
train_hieramas.py) and the sweep specs (launch/sweeps/*.json, each naming its program) are data that
nothing else reads until a long run reaches them: a renamed or removed flag would fail an hour into
`make results`. Here each program's module is loaded once in a child process (its flags defined as
when it runs; its main not called), and every committed flag set is parsed by absl against them:
an unknown flag or an invalid enum value fails the test with the file that holds it.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "launch"))
import sweep  # noqa: E402  (launch/ is a scripts folder, not a package)

# Loads a program's flag definitions, then parses each argv given on stdin (one JSON list per line).
# Prints one JSON line per argv: null if it parsed, else the error.
_DRIVER = r"""
import json, runpy, sys
from absl import flags
runpy.run_path(sys.argv[1], run_name="flag_definitions_only")
for line in sys.stdin:
  argv = json.loads(line)
  try:
    flags.FLAGS(["prog", *argv])
    print(json.dumps(None))
  except flags.Error as e:
    print(json.dumps(str(e)))
  flags.FLAGS.unparse_flags()
"""


def _flag_sets() -> dict[str, list[tuple[str, list[str]]]]:
  """program path -> [(where the flag set is written, argv)]."""
  sets: dict[str, list[tuple[str, list[str]]]] = {}
  for path in sorted((REPO / "experiments" / "ablations").glob("*.flags")):
    where = str(path.relative_to(REPO))
    # As `make results` runs them: the flag file plus the benchmark and pool it adds.
    sets.setdefault("experiments/train_hieramas.py", []).append(
        (where, [f"--flagfile={path}", "--benchmark=math", "--pool=gpt-5-mini"]))
  for path in sorted((REPO / "launch" / "sweeps").glob("*.json")):
    spec = sweep.load_spec(str(path))
    for point in sweep.grid_points(spec):
      argv = sweep.point_command(spec, point)[2:]
      sets.setdefault(spec["program"], []).append((f"{path.relative_to(REPO)} {point}", argv))
  return sets


def test_there_are_flag_sets_to_check():
  sets = _flag_sets()
  assert "experiments/train_hieramas.py" in sets
  assert sum(len(v) for v in sets.values()) >= 9  # 7 ablation files + the sweeps' grid points


@pytest.mark.parametrize("program", sorted(_flag_sets()))
def test_committed_flag_sets_parse(program):
  cases = _flag_sets()[program]
  proc = subprocess.run([sys.executable, "-c", _DRIVER, str(REPO / program)],
                        input="".join(json.dumps(argv) + "\n" for _, argv in cases),
                        capture_output=True, text=True, cwd=REPO, timeout=240,
                        env={**os.environ, "PYTHONPATH": str(REPO)})
  assert proc.returncode == 0, proc.stderr[-2000:]
  errors = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith(("null", '"'))]
  assert len(errors) == len(cases), proc.stdout[-2000:]
  bad = [f"{where}: {err}" for (where, _), err in zip(cases, errors) if err is not None]
  assert not bad, "\n".join(bad)


def test_driver_catches_an_unknown_flag():
  """The check itself can fail: a misspelt flag is reported, not ignored."""
  proc = subprocess.run([sys.executable, "-c", _DRIVER, str(REPO / "experiments/train_hieramas.py")],
                        input=json.dumps(["--benchmark=math", "--no_such_flag=1"]) + "\n"
                        + json.dumps(["--benchmark=no_such_benchmark"]) + "\n",
                        capture_output=True, text=True, cwd=REPO, timeout=240,
                        env={**os.environ, "PYTHONPATH": str(REPO)})
  assert proc.returncode == 0, proc.stderr[-2000:]
  out = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith(("null", '"'))]
  assert len(out) == 2 and all(out), out
  assert "no_such_flag" in out[0]
