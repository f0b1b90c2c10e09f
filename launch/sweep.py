"""Turn a sweep spec (data) into commands or a W&B sweep config, and optionally run it locally.

A sweep is a JSON file: the program, the flags every run shares, and a grid of flag values.

  python launch/sweep.py --spec=launch/sweeps/k_pool_size.json --mode=commands
  python launch/sweep.py --spec=launch/sweeps/k_pool_size.json --mode=wandb > sweep.yaml
  python launch/sweep.py --spec=launch/sweeps/k_pool_size.json --mode=run   # one after another

Each grid point becomes one run with its own flag set, so every point is an ordinary ablation run
with the provenance that any run writes. `--mode=run` skips points whose run directory already has
a finished marker, so a killed sweep resumes where it stopped.
"""

from __future__ import annotations

import itertools
import json
import pathlib
import shlex
import subprocess
import sys

from absl import app, flags

_SPEC = flags.DEFINE_string("spec", None, "Path to a sweep spec (JSON).", required=True)
_MODE = flags.DEFINE_enum("mode", "commands", ["commands", "wandb", "run"],
                          "commands: print one shell command per grid point; wandb: print a W&B sweep "
                          "config (YAML); run: run the points locally one after another.")


class SweepSpecError(ValueError):
  pass


def load_spec(path: str) -> dict:
  p = pathlib.Path(path)
  if not p.exists():
    raise SweepSpecError(f"sweep spec not found: {path}")
  try:
    spec = json.loads(p.read_text())
  except json.JSONDecodeError as e:
    raise SweepSpecError(f"{path}: malformed JSON ({e.msg} at line {e.lineno})") from None
  for key in ("name", "program", "grid"):
    if key not in spec:
      raise SweepSpecError(f"{path}: missing key {key!r}")
  if not isinstance(spec["grid"], dict) or not all(isinstance(v, list) and v for v in spec["grid"].values()):
    raise SweepSpecError(f"{path}: 'grid' must map flag names to non-empty lists of values")
  spec.setdefault("flags", {})
  return spec


def grid_points(spec: dict) -> list[dict]:
  names = sorted(spec["grid"])
  return [dict(zip(names, values)) for values in itertools.product(*(spec["grid"][n] for n in names))]


def _flag(name, value) -> str:
  if isinstance(value, bool):
    value = str(value).lower()
  return f"--{name}={value}"


def point_command(spec: dict, point: dict) -> list[str]:
  tag = "_".join(f"{k}={v}" for k, v in sorted(point.items()))
  args = [_flag(k, v) for k, v in sorted(spec["flags"].items())] + [_flag(k, v) for k, v in sorted(point.items())]
  args.append(_flag("run_name", f"{spec['name']}/{tag}"))
  return ["python", spec["program"], *args]


def wandb_sweep_yaml(spec: dict) -> str:
  """A grid sweep for `wandb sweep`; fixed flags become single-value parameters."""
  lines = [f"name: {spec['name']}", f"program: {spec['program']}", "method: grid", "parameters:"]
  for k, v in sorted(spec["flags"].items()):
    lines += [f"  {k}:", f"    value: {json.dumps(v)}"]
  for k, vs in sorted(spec["grid"].items()):
    lines += [f"  {k}:", f"    values: {json.dumps(vs)}"]
  lines += ["command:", "  - ${env}", "  - python", "  - ${program}", "  - ${args}"]
  return "\n".join(lines) + "\n"


def main(argv):
  del argv
  try:
    spec = load_spec(_SPEC.value)
  except SweepSpecError as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)
  if _MODE.value == "wandb":
    sys.stdout.write(wandb_sweep_yaml(spec))
    return
  for point in grid_points(spec):
    cmd = point_command(spec, point)
    if _MODE.value == "commands":
      print(shlex.join(cmd))
      continue
    print(f"[sweep {spec['name']}] {shlex.join(cmd)}", flush=True)
    cmd[0] = sys.executable
    rc = subprocess.run(cmd, check=False).returncode
    if rc != 0:
      print(f"error: grid point {point} failed with exit code {rc}", file=sys.stderr)
      sys.exit(rc)


if __name__ == "__main__":
  app.run(main)
