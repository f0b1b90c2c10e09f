"""Turn a sweep spec (data) into commands or a W&B sweep config, or walk its grid locally.

A sweep is a JSON file: the program, the flags every run shares, a grid of flag values, and where each
point's results file lands.

  python launch/sweep.py --spec=launch/sweeps/k_pool_size.json --mode=commands
  python launch/sweep.py --spec=launch/sweeps/k_pool_size.json --mode=wandb > launch/k_pool_size.yaml
  python launch/sweep.py --spec=launch/sweeps/k_pool_size.json --mode=run --parallel=2   # make sweep-k

Each grid point becomes one run with its own flag set, so every point is an ordinary ablation run
with the provenance that any run writes (a point whose tag names every grid flag is the same cell as
the ablation flagfile of that value: `--tag=k{k_pool}` at k_pool=50 is `k_50.flags`). The committed
W&B sweep configs `launch/<name>.yaml` are this script's `--mode=wandb` output (a test keeps them equal);
`wandb sweep launch/<name>.yaml` + `wandb agent <id>` runs the same grid on as many machines as wanted.

`--mode=run` walks the grid on this machine without a W&B server: a point is finished when its results
file exists and records the point's flags (so a killed sweep resumes where it stopped, and a stale file
of another configuration does not count), up to `--parallel` points run at once, and the sweep's table
and plot go to `<out_dir>/sweep_<name>.{md,json,png}` (`report/sweeps.py`).
"""

from __future__ import annotations

import itertools
import json
import pathlib
import shlex
import subprocess
import sys
import time

from absl import flags

from hieramas_jax.errors import UserError
from hieramas_jax.experiment import cli

REPO = pathlib.Path(__file__).resolve().parents[1]

_SPEC = flags.DEFINE_string("spec", None, "Path to a sweep spec (JSON).", required=True)
_MODE = flags.DEFINE_enum("mode", "commands", ["commands", "wandb", "run"],
                          "commands: print one shell command per grid point; wandb: print a W&B sweep "
                          "config (YAML); run: run the points locally (resumable, in parallel).")
_PARALLEL = flags.DEFINE_integer("parallel", 1, "--mode=run: most grid points running at once.", lower_bound=1)
_OUT_DIR = flags.DEFINE_string("out_dir", str(REPO / "results"), "--mode=run: where sweep_<name>.* are written.")
_EXTRA = flags.DEFINE_multi_string("extra", [], "--mode=run / commands: one more flag for every point, e.g. "
                                   "--extra=--limit=8 (it takes part in the finished-point check).")

# Grid/flag values the results file must record for a point to count as finished.
RESULTS_DEFAULT = "results/hieramas_{benchmark}_{pool}_{tag}.json"


class SweepSpecError(UserError, ValueError):
  """A sweep spec that is missing or malformed: one `error:` line, exit 2."""


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
  clash = sorted(set(spec["flags"]) & set(spec["grid"]))
  if clash:
    raise SweepSpecError(f"{path}: {', '.join(clash)} both fixed and swept")
  return spec


def grid_points(spec: dict) -> list[dict]:
  names = sorted(spec["grid"])
  return [dict(zip(names, values)) for values in itertools.product(*(spec["grid"][n] for n in names))]


def _flag(name, value) -> str:
  if isinstance(value, bool):
    value = str(value).lower()
  return f"--{name}={value}"


def point_values(spec: dict, point: dict) -> dict:
  """Every flag of the point (fixed + swept), with the tag's template filled in."""
  values = {**spec["flags"], **point}
  if isinstance(values.get("tag"), str):
    values["tag"] = values["tag"].format(**values)
  return values


def point_command(spec: dict, point: dict, extra: tuple[str, ...] = ()) -> list[str]:
  """The point's command. Its flags are the spec's as written (the program fills a tag template itself,
  as under a W&B agent); a spec without a tag names each point's run with --run_name instead."""
  args = [_flag(k, v) for k, v in sorted(spec["flags"].items())] + [_flag(k, v) for k, v in sorted(point.items())]
  if "tag" not in spec["flags"]:
    tag = "_".join(f"{k}={v}" for k, v in sorted(point.items()))
    args.append(_flag("run_name", f"{spec['name']}/{tag}"))
  return ["python", spec["program"], *args, *extra]


def results_file(spec: dict, point: dict, extra: tuple[str, ...] = ()) -> pathlib.Path:
  """The point's results file; a point of seed n > 0 (a `seed` axis or flag) reads `_seed<n>`, as the program writes
  it; a point run with limits (its flags or --extra) writes its limits' suffix
  (`TableSpec.results_suffix`), as the suite's programs do, never the full-size file; one off the
  embedded sim (--extra=--pool_file=...) writes under results/<its name>/ (`cli.route_results_off_sim`)."""
  from hieramas_jax.experiment.cli import off_sim_results_name  # pylint: disable=import-outside-toplevel
  from hieramas_jax.paths import RESULTS_DIR  # pylint: disable=import-outside-toplevel
  template = spec.get("results", RESULTS_DEFAULT)
  path = REPO / template.format(**point_values(spec, point))
  v = _point_flags(spec, point, extra)
  seed = int(v.get("seed") or 0)
  if seed and "{seed}" not in template:  # seed 0 keeps the plain name, others `_seed<n>` (report.hieramas.results_name)
    path = path.with_name(f"{path.stem}_seed{seed}{path.suffix}")
  name = off_sim_results_name(v.get("pool_file"), v.get("backend") or "sim", v.get("base_url"))
  if name and path.parent == RESULTS_DIR and not v.get("out_dir"):
    path = RESULTS_DIR / name / path.name
  if not any(v.get(k) not in (None, "") for k in ("limit", "train_limit", "val_limit")):
    return path
  return path.with_name(path.stem + _point_table(v).results_suffix() + path.suffix)


def _point_flags(spec: dict, point: dict, extra: tuple[str, ...]) -> dict:
  """Every flag of the point, --extra included."""
  values = point_values(spec, point)
  for e in extra:
    name, _, value = e.lstrip("-").partition("=")
    values[name] = value
  return values


def _point_table(v: dict):
  """The one-cell TableSpec of a HieraMAS point's flags (its limits name its run root and results suffix)."""
  from hieramas_jax.experiment.spec import TableSpec  # pylint: disable=import-outside-toplevel
  limits = {k: int(v[k]) if v.get(k) not in (None, "") else None for k in ("train_limit", "val_limit", "limit")}
  return TableSpec(methods=("hieramas",), benchmarks=(v["benchmark"],), pools=(v["pool"],),
                   seeds=(int(v.get("seed") or 0),),
                   train_limit={v["benchmark"]: limits["train_limit"]} if limits["train_limit"] else {},
                   val_limit=limits["val_limit"], test_limit=limits["limit"])


def _same(recorded, wanted) -> bool:
  # A path flag is recorded the way a result file shows it (provenance.portable_value), not as typed.
  # Imported here, like the module's other library imports: --mode=commands stays light.
  from hieramas_jax.experiment.provenance import portable_value  # pylint: disable=import-outside-toplevel
  return any(recorded == w or str(recorded).lower() == str(w).lower() for w in (wanted, portable_value(wanted)))


def is_finished(spec: dict, point: dict, extra: tuple[str, ...] = ()) -> bool:
  """The point's results file exists and its provenance records the point's flags (fixed, swept, extra)."""
  path = results_file(spec, point, extra)
  if not path.exists():
    return False
  try:
    recorded = json.loads(path.read_text())["provenance"]["flags"]
  except (json.JSONDecodeError, KeyError, TypeError):
    return False
  wanted = _point_flags(spec, point, extra)
  recorded = dict(recorded)
  if isinstance(recorded.get("tag"), str):  # a template filled in the same way ("k{k_pool}" and "k50" agree)
    try:
      recorded["tag"] = recorded["tag"].format(**recorded)
    except (KeyError, ValueError, IndexError):
      pass
  return (all(k in recorded and _same(recorded[k], v) for k, v in wanted.items()) and _made_by_this_sim(path, recorded)
          and _cell_still_there(path))


def _cell_still_there(path: pathlib.Path) -> bool:
  """Whether the finished cell a point's results file names is still in its run directory.

  Why: a results file is a claim about a run; once the run directory is gone (runs/ cleared to rerun
  after a code change, or a fresh clone holding only the committed results) the point is run again
  instead of keeping a figure the current code never made. Results files naming no run directory (older
  ones) are taken as they are.
  """
  run_dir = json.loads(path.read_text()).get("run_dir")
  if not run_dir:
    return True
  cell = pathlib.Path(run_dir) if pathlib.Path(run_dir).is_absolute() else REPO / run_dir
  return (cell / "summary.json").exists()


def _made_by_this_sim(path: pathlib.Path, recorded: dict) -> bool:
  """Whether a point's results on the embedded sim come from the simulated pool as it is now.

  Why: a results file written by an older sim (another fingerprint) or another profile records the
  same flags; counting it finished would put an older simulator's figure into a new sweep table. The
  run directory it names carries the sim's endpoint name (seed, profile, fingerprint of its code and
  data); a real endpoint's results are taken as they are.
  """
  from hieramas_jax.experiment.backend import sim_endpoint_name  # pylint: disable=import-outside-toplevel
  from hieramas_jax.experiment.rundir import safe_name  # pylint: disable=import-outside-toplevel
  data = json.loads(path.read_text())
  if (data.get("provenance") or {}).get("backend") != "sim" or recorded.get("base_url"):
    return True
  seed = int(recorded.get("seed") or 0)
  current = safe_name(sim_endpoint_name(seed, recorded.get("sim_profile") or "fitted"))
  return current in pathlib.PurePosixPath(str(data.get("run_dir", ""))).parts


def wandb_sweep_config(spec: dict) -> dict:
  """The W&B grid sweep: fixed flags as single-value parameters; `${args}` passes them as --name=value."""
  parameters = {k: {"value": v} for k, v in sorted(spec["flags"].items())}
  parameters.update({k: {"values": list(vs)} for k, vs in sorted(spec["grid"].items())})
  return {"name": spec["name"], "description": spec.get("description", ""), "program": spec["program"],
          "method": "grid", "metric": {"name": "accuracy", "goal": "maximize"}, "parameters": parameters,
          "command": ["${env}", "python", "${program}", "${args}"]}


def wandb_sweep_yaml(spec: dict, spec_path: str | None = None) -> str:
  """`wandb_sweep_config` as YAML (block style, flow lists), with the command that made it."""
  cfg = wandb_sweep_config(spec)
  lines = []
  if spec_path:
    lines += [f"# Generated by: python launch/sweep.py --spec={spec_path} --mode=wandb",
              "# Run: wandb sweep <this file>, then `wandb agent <sweep id>` on every machine (repository root,",
              "# the venv activated: the agent runs `python`)."]
  lines += [f"name: {cfg['name']}", f"description: {json.dumps(cfg['description'])}", f"program: {cfg['program']}",
            "method: grid", "metric:", "  name: accuracy", "  goal: maximize", "parameters:"]
  for k, v in cfg["parameters"].items():
    lines.append(f"  {k}:")
    lines += [f"    value: {json.dumps(v['value'])}"] if "value" in v else [f"    values: {json.dumps(v['values'])}"]
  lines += ["command:"] + [f"  - {c}" for c in cfg["command"]]
  return "\n".join(lines) + "\n"


def run_grid(spec: dict, *, parallel: int, extra: tuple[str, ...] = (), python: str = sys.executable,
             poll_s: float = 0.2) -> list[dict]:
  """Runs every unfinished point (at most `parallel` at once); returns per point what happened.

  A failed point does not stop the others; the caller reports it (non-zero exit).
  """
  outcomes = []
  todo = []
  for point in grid_points(spec):
    if is_finished(spec, point, extra):
      print(f"[sweep {spec['name']}] finished, skipped: {point}", flush=True)
      outcomes.append({"point": point, "status": "skipped"})
    else:
      todo.append(point)
  running: list[tuple[dict, subprocess.Popen]] = []
  while todo or running:
    while todo and len(running) < parallel:
      point = todo.pop(0)
      cmd = point_command(spec, point, extra)
      print(f"[sweep {spec['name']}] {shlex.join(cmd)}", flush=True)
      running.append((point, subprocess.Popen([python, *cmd[1:]], cwd=REPO)))
    still = []
    for point, proc in running:
      rc = proc.poll()
      if rc is None:
        still.append((point, proc))
      else:
        ok = rc == 0 and is_finished(spec, point, extra)
        outcomes.append({"point": point, "status": "done" if ok else "failed", "returncode": rc})
        if not ok:
          print(f"error: grid point {point} failed (exit code {rc})", file=sys.stderr, flush=True)
    running = still
    if running:
      time.sleep(poll_s)
  return outcomes


def untrained_loads(spec: dict, extra: tuple[str, ...] = ()) -> list[str]:
  """Why points that load the main run's fit (`--load_run=main`) cannot run yet: one line per missing fit,
  with the command that trains it (empty: nothing is missing).

  Why up front: every such point would fail on its own after starting its backend, and a sweep of
  failed points would still write a table of "not run yet" rows. Checked on the embedded sim's run
  directories (a point on a real endpoint is checked by its program, before it sends anything).
  """
  # Library imports here, like the module's others: --mode=commands and --mode=wandb stay light.
  from hieramas_jax.experiment.backend import sim_endpoint_name  # pylint: disable=import-outside-toplevel
  from hieramas_jax.experiment.rundir import FIT_FILE, repo_relative  # pylint: disable=import-outside-toplevel
  from hieramas_jax.experiment.runner import cell_dir, table_root  # pylint: disable=import-outside-toplevel
  from hieramas_jax.experiment.spec import SAME_RUN_UNTAGGED, Cell, train_command  # pylint: disable=C0415
  problems: dict[str, str] = {}
  for point in grid_points(spec):
    v = _point_flags(spec, point, extra)
    if v.get("load_run") != SAME_RUN_UNTAGGED or v.get("base_url") or is_finished(spec, point, extra):
      continue
    table = _point_table(v)
    seed = table.seeds[0]
    cell = Cell("hieramas", v["benchmark"], v["pool"], "main", seed)
    run_root = v.get("run_root") or "runs/table1" + table.limits_suffix()
    source = cell_dir(table_root(REPO / run_root, sim_endpoint_name(seed, v.get("sim_profile") or "fitted")), cell)
    if not (source / FIT_FILE).exists():
      problems[str(source)] = (
          f"sweep {spec['name']}: --load_run={SAME_RUN_UNTAGGED} needs the trained cell {repo_relative(source)}, "
          f"which holds no finished fit: train it first: "
          + train_command(cell, run_root=v.get("run_root"), train_limit=table.train_limit.get(cell.benchmark),
                          val_limit=table.val_limit, test_limit=table.test_limit))
  return list(problems.values())


def write_table(spec: dict, out_dir: str | pathlib.Path, extra: tuple[str, ...] = ()) -> list[pathlib.Path]:
  """The sweep's table and plot from whatever points have results (report/sweeps.py)."""
  from hieramas_jax.experiment.provenance import command_line, provenance  # pylint: disable=C0415
  from hieramas_jax.experiment.rundir import repo_relative  # pylint: disable=C0415
  from hieramas_jax.report.sweeps import sweep_record, write_sweep  # pylint: disable=C0415
  points = []
  for point in grid_points(spec):
    path = results_file(spec, point, extra)
    finished = is_finished(spec, point, extra)
    points.append({"values": point, "results_file": repo_relative(path),
                   "results": json.loads(path.read_text()) if finished else None})
  backends = {(p["results"].get("provenance") or {}).get("backend") for p in points if p["results"]}
  prov = provenance(seed=spec["flags"].get("seed"), flags={"spec": spec, "extra": list(extra)},
                    backend=",".join(sorted(b for b in backends if b)) or None, command=command_line())
  return write_sweep(sweep_record(spec, points, prov), out_dir)


def main():
  spec = load_spec(_SPEC.value)
  extra = tuple(_EXTRA.value)
  if _MODE.value == "wandb":
    sys.stdout.write(wandb_sweep_yaml(spec, _SPEC.value))
    return
  if _MODE.value == "commands":
    for point in grid_points(spec):
      print(shlex.join(point_command(spec, point, extra)))
    return
  missing = untrained_loads(spec, extra)
  if missing:
    raise SweepSpecError("\n".join(missing))
  outcomes = run_grid(spec, parallel=_PARALLEL.value, extra=extra)
  failed = [o for o in outcomes if o["status"] == "failed"]
  if len(failed) == len(outcomes):  # nothing finished: no table of "not run yet" rows
    print(f"error: sweep {spec['name']}: no point finished; no table written", file=sys.stderr, flush=True)
    sys.exit(1)
  written = write_table(spec, _OUT_DIR.value, extra)
  print(f"[sweep {spec['name']}] {len(outcomes) - len(failed)} of {len(outcomes)} points finished; wrote "
        + ", ".join(str(p) for p in written), flush=True)
  if failed:
    sys.exit(1)


if __name__ == "__main__":
  cli.run(main)
