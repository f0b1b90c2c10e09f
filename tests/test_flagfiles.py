"""Every committed flag set parses against the flags of the program it is written for.

The ablation flag files (experiments/ablations/*.flags, run by `make results` through
train_hieramas.py), the sweep specs (launch/sweeps/*.json, each naming its program; the W&B sweep YAMLs
in launch/ are generated from them and tests/test_launch.py keeps the two equal) and the Makefile's
commands (`make results`, `make regret`, `make bench`, ...) are data that nothing else reads until a
long run reaches them: a renamed or removed flag would fail an hour into `make results`. Here each
program's module is loaded once in a child process (its flags defined as when it runs; its main not
called), and every committed flag set is parsed by absl against them: an unknown flag, an invalid enum
value or a missing program fails the test with the file (and line) that holds it.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "launch"))
import sweep  # noqa: E402  (launch/ is a scripts folder, not a package)

from hieramas_jax.sim.server import SimConfig  # noqa: E402

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

_PY = "__PY__"  # stands for $(PY), the venv's interpreter, in the Makefile's recipes


def _program_path(tokens: list[str]) -> str | None:
  """The repository path of the program a `$(PY) ...` command runs (a script or `-m module`)."""
  if tokens[0] == "-m":
    path = REPO / (tokens[1].replace(".", "/") + ".py")
    return str(path.relative_to(REPO)) if path.exists() else None  # e.g. `-m pytest`: not ours
  return tokens[0]


def _makefile_commands() -> list[tuple[str, str, list[str]]]:
  """(where, program, argv) of every `$(PY) program ...` command in the Makefile's recipes.

  Make variables take their defaults (`SEED ?= 0`), `$(filter-out ...)` is applied, and a recipe's shell loops
  (`for b in math mmlu_redux; do ... $$b ...`) are expanded to every combination of their values.
  """
  text = (REPO / "Makefile").read_text()
  variables = dict(re.findall(r"^([A-Z_]+)\s*(?:\?=|:=|=)\s*(.*?)\s*$", text, flags=re.M))
  variables["PY"] = _PY
  commands = []
  lines = text.split("\n")
  i = 0
  while i < len(lines):
    start, line = i + 1, lines[i]
    while line.endswith("\\") and i + 1 < len(lines):  # a recipe line continued with a backslash
      i += 1
      line = line[:-1] + " " + lines[i].strip()
    i += 1
    if not line.startswith("\t") or "$(PY)" not in line:
      continue
    line = re.sub(r"\$\((\w+)\)", lambda m: variables.get(m.group(1), m.group(0)), line)
    # make's $(filter-out drop,words), the one text function the recipes use (seeds other than SEED).
    line = re.sub(r"\$\(filter-out ([^,()]*),([^()]*)\)",
                  lambda m: " ".join(w for w in m.group(2).split() if w not in m.group(1).split()), line)
    loops = re.findall(r"\bfor (\w+) in ([^;]+);", line)
    names = [name for name, _ in loops]
    for values in itertools.product(*(v.split() for _, v in loops)):
      expanded = line
      for name, value in zip(names, values):
        expanded = expanded.replace(f"$${name}", value)
      lexer = shlex.shlex(expanded, posix=True, punctuation_chars=True)
      lexer.whitespace_split = True
      tokens = list(lexer)
      for k, token in enumerate(tokens):
        if token != _PY:
          continue
        command = list(itertools.takewhile(lambda t: not set(t) <= set(";|&<>()"), tokens[k + 1:]))
        program = _program_path(command)
        if program is None:
          continue
        argv = command[2:] if command[0] == "-m" else command[1:]
        where = f"Makefile:{start}" + (f" ({', '.join(f'{n}={v}' for n, v in zip(names, values))})" if names else "")
        commands.append((where, program, argv))
  return commands


@functools.lru_cache(maxsize=1)
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
  for where, program, argv in _makefile_commands():
    sets.setdefault(program, []).append((where, argv))
  # The flags start_sim_subprocess passes to the served sim (every SimConfig field, set off its default).
  config = SimConfig(seed=3, latency_scale=0.5, fixed_latency_s=0.25, fault_rate_429=0.1, strict_quirks=False,
                     profile="high")
  sets.setdefault("hieramas_jax/sim/serve.py", []).append(("SimConfig.to_args", config.to_args()))
  return sets


def _start_driver(program: str, argvs: list[list[str]]) -> subprocess.Popen:
  with tempfile.TemporaryFile("w+") as stdin:  # a file, not a pipe: nothing to feed while others run
    stdin.write("".join(json.dumps(argv) + "\n" for argv in argvs))
    stdin.seek(0)
    return subprocess.Popen([sys.executable, "-c", _DRIVER, str(REPO / program)], stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.fixture(scope="module")
def parsed() -> dict[str, tuple[int, str, str]]:
  """program -> (exit status, stdout, stderr) of its driver; all programs load at once (one import of
  JAX and the library each, seconds apiece), so the module costs about the slowest one."""
  procs = {program: _start_driver(program, [argv for _, argv in cases]) for program, cases in _flag_sets().items()}
  out = {}
  for program, proc in procs.items():
    try:
      stdout, stderr = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
      proc.kill()
      stdout, stderr = proc.communicate()
    out[program] = (proc.returncode, stdout, stderr)
  return out


def test_there_are_flag_sets_to_check():
  sets = _flag_sets()
  assert "experiments/train_hieramas.py" in sets
  assert sum(len(v) for v in sets.values()) >= 9  # 7 ablation files + the sweeps' grid points
  # The Makefile's commands are read too: `make results` trains 3 x 2 main and 3 x 2 ablation cells.
  makefile = [(where, argv) for cases in sets.values() for where, argv in cases if where.startswith("Makefile:")]
  assert len(makefile) >= 20, makefile
  assert any("--flagfile=experiments/ablations/total_cost.flags" in argv and "--benchmark=math" in argv
             for _, argv in sets["experiments/train_hieramas.py"])
  assert {"experiments/reproduce_table1.py", "experiments/oracle_regret.py", "launch/sweep.py"} <= set(sets)


@pytest.mark.parametrize("program", sorted(_flag_sets()))
def test_committed_flag_sets_parse(program, parsed):
  cases = _flag_sets()[program]
  assert (REPO / program).exists(), f"{program} is gone; run from {[where for where, _ in cases]}"
  returncode, stdout, stderr = parsed[program]
  assert returncode == 0, stderr[-2000:]
  errors = [json.loads(line) for line in stdout.splitlines() if line.startswith(("null", '"'))]
  assert len(errors) == len(cases), stdout[-2000:]
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


def test_makefile_commands_are_read_with_their_defaults_and_loops():
  """The Makefile reader itself: variables take their defaults, loops expand, redirections are cut."""
  commands = _makefile_commands()
  by_program: dict[str, list[list[str]]] = {}
  for _, program, argv in commands:
    by_program.setdefault(program, []).append(argv)
  assert ["--seeds=0"] in by_program["experiments/reproduce_table1.py"]  # $(SEED) -> 0
  assert ["--dry_run", "--pool_file=launch/pools/openrouter_paper.toml"] in by_program["experiments/reproduce_table1.py"]
  trains = by_program["experiments/train_hieramas.py"]
  assert ["--benchmark=humaneval_plus", "--pool=qwen3-80b", "--seed=0", "--progress=false"] in trains
  assert ["--flagfile=experiments/ablations/wo_graph.flags", "--benchmark=mmlu_redux", "--pool=gpt-5-mini",
          "--seed=2", "--progress=false"] in trains
  # RESULT_SEEDS minus SEED: the extra seeds of the main cells, each once, and never seed 0 twice.
  extra = [argv for argv in trains if argv[:2] == ["--benchmark=math", "--pool=gpt-5-mini"]]
  assert sorted(argv[2] for argv in extra) == ["--seed=0", "--seed=1", "--seed=2"], extra
  assert not any(p == "tests/real" or "pytest" in p for p in by_program)  # `-m pytest` is not a repo program
  assert by_program["hieramas_jax/sim/serve.py"] == [["--seed=0"]]  # `make sim-server`
