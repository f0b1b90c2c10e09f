"""Sweeps are data: a spec becomes one command per grid point, or a W&B grid sweep."""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

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
  assert cmd[-1] == "--run_name=s/k_pool=50_num_proposers=6"  # no tag in the spec: each point names its run


def test_wandb_sweep_config_lists_fixed_and_grid_parameters(tmp_path):
  spec = sweep.load_spec(_spec(tmp_path, {"name": "s", "program": "p.py", "flags": {"seed": 0},
                                          "grid": {"k_pool": [50, 500]}}))
  text = sweep.wandb_sweep_yaml(spec)
  assert "method: grid" in text and "program: p.py" in text
  assert "  k_pool:\n    values: [50, 500]" in text and "  seed:\n    value: 0" in text
  assert yaml.safe_load(text) == sweep.wandb_sweep_config(spec)


def _yaml_grid(config: dict) -> list[dict]:
  """The points a W&B grid sweep enumerates: the product of every parameter's values."""
  params = config["parameters"]
  names = sorted(params)
  choices = [params[n]["values"] if "values" in params[n] else [params[n]["value"]] for n in names]
  return [dict(zip(names, combo)) for combo in itertools.product(*choices)]


@pytest.mark.parametrize("name", ["k_pool_size", "num_proposers"])
def test_committed_wandb_yaml_is_the_spec_and_enumerates_the_local_runners_grid(name):
  spec_path = f"launch/sweeps/{name}.json"
  spec = sweep.load_spec(str(REPO / spec_path))
  committed = (REPO / "launch" / f"{name}.yaml").read_text()
  assert committed == sweep.wandb_sweep_yaml(spec, spec_path), "regenerate with launch/sweep.py --mode=wandb"
  config = yaml.safe_load(committed)
  # What `wandb agent` passes (${args}: --name=value of every parameter) equals the local command's flags.
  local = [sorted(sweep.point_command(spec, p)[2:]) for p in sweep.grid_points(spec)]
  agent = [sorted(f"--{k}={v}" for k, v in point.items()) for point in _yaml_grid(config)]
  assert sorted(local) == sorted(agent)
  assert config["program"] == spec["program"] and (REPO / config["program"]).exists()
  assert config["command"] == ["${env}", "python", "${program}", "${args}"]
  # The committed MMLU-Redux results trained on the first 512 training queries.
  assert config["parameters"]["train_limit"] == {"value": 512}


FAKE_PROGRAM = """
import json, os, pathlib, sys
args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
log = pathlib.Path(args["log"])
with open(log, "a") as f:
  f.write(json.dumps(args) + "\\n")
if os.environ.get("FAKE_FAIL") == args["k"]:
  sys.exit(3)
tag = args["tag"].format(**args)
out = pathlib.Path(args["out"]) / f"r_{tag}.json"
out.write_text(json.dumps({"accuracy": 50.0 + int(args["k"]), "n": 4, "cost_usd": 0.4, "mean_cost_usd": 0.1,
                           "mean_system_reward": 0.5, "mean_active_roles": 1.0,
                           "run_dir": os.environ["FAKE_RUN_DIR"],
                           "provenance": {"flags": {**args, "k": int(args["k"])}, "backend": "sim",
                                          "command": "fake"}}))
"""


@pytest.fixture(autouse=True)
def _fake_run_dir(monkeypatch, tmp_path):
  # The fake program's results name a finished cell under the current sim's endpoint, as real ones do.
  from hieramas_jax.experiment.backend import sim_endpoint_name
  from hieramas_jax.experiment.rundir import safe_name
  cell = tmp_path / "runs" / "table1" / safe_name(sim_endpoint_name(0)) / "main" / "seed0" / "x"
  cell.mkdir(parents=True)
  (cell / "summary.json").write_text("{}")
  monkeypatch.setenv("FAKE_RUN_DIR", str(cell))


def _fake_sweep(tmp_path, **flags) -> dict:
  program = tmp_path / "fake.py"
  program.write_text(FAKE_PROGRAM)
  out = tmp_path / "out"
  out.mkdir(exist_ok=True)
  return {"name": "fake", "program": str(program), "grid": {"k": [1, 2, 3]},
          "flags": {"tag": "k{k}", "out": str(out), "log": str(tmp_path / "calls.jsonl"), **flags},
          "results": str(out / "r_{tag}.json")}


def _calls(tmp_path) -> list[int]:
  path = tmp_path / "calls.jsonl"
  return sorted(int(json.loads(l)["k"]) for l in path.read_text().splitlines()) if path.exists() else []


def test_local_runner_skips_finished_points_and_resumes_a_killed_sweep(tmp_path, monkeypatch):
  spec = _fake_sweep(tmp_path, extra_flag="x")
  monkeypatch.setenv("FAKE_FAIL", "2")
  outcomes = sweep.run_grid(spec, parallel=2, poll_s=0.05)
  assert {o["point"]["k"]: o["status"] for o in outcomes} == {1: "done", 2: "failed", 3: "done"}
  assert _calls(tmp_path) == [1, 2, 3]
  # The rerun (the "killed" point 2 now succeeds) runs only what is not finished.
  monkeypatch.delenv("FAKE_FAIL")
  (tmp_path / "calls.jsonl").unlink()
  # A finished file of another configuration does not count: point 3's recorded flags are changed.
  r3 = tmp_path / "out" / "r_k3.json"
  rec = json.loads(r3.read_text())
  rec["provenance"]["flags"]["extra_flag"] = "y"
  r3.write_text(json.dumps(rec))
  outcomes = sweep.run_grid(spec, parallel=2, poll_s=0.05)
  assert {o["point"]["k"]: o["status"] for o in outcomes} == {1: "skipped", 2: "done", 3: "done"}
  assert _calls(tmp_path) == [2, 3]
  assert sweep.run_grid(spec, parallel=2, poll_s=0.05) == [{"point": {"k": k}, "status": "skipped"} for k in (1, 2, 3)]
  # A point made by an older simulated pool (another fingerprint in its run directory) is not finished.
  r1 = tmp_path / "out" / "r_k1.json"
  rec = json.loads(r1.read_text())
  rec["run_dir"] = "runs/table1/sim-seed0-8de37b2e697a/main/seed0/x"
  r1.write_text(json.dumps(rec))
  assert not sweep.is_finished(spec, {"k": 1}) and sweep.is_finished(spec, {"k": 2})
  # Nor is a point whose cell is gone from its run directory (runs/ cleared to rerun after a code change).
  (pathlib.Path(os.environ["FAKE_RUN_DIR"]) / "summary.json").unlink()
  assert not sweep.is_finished(spec, {"k": 2})


def test_local_runner_writes_the_sweep_table_and_plot(tmp_path):
  spec = _fake_sweep(tmp_path)
  sweep.run_grid(spec, parallel=3, poll_s=0.05)
  written = sweep.write_table(spec, tmp_path / "results")
  assert sorted(p.name for p in written) == ["sweep_fake.json", "sweep_fake.md", "sweep_fake.png"]
  record = json.loads((tmp_path / "results" / "sweep_fake.json").read_text())
  assert [r["accuracy"] for r in record["rows"]] == [51.0, 52.0, 53.0]
  assert record["backend"] == "sim" and "simulated pool" in record["label"]
  md = (tmp_path / "results" / "sweep_fake.md").read_text()
  assert md.splitlines()[0] == "# Sweep fake - simulated pool (profile fitted)" and "| 2 | 52.00 |" in md
  assert (tmp_path / "results" / "sweep_fake.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("n", [4, 250])
def test_a_sweep_point_at_100_percent_is_drawn_with_its_interval_inside_the_scale(tmp_path, n):
  from hieramas_jax.report.sweeps import sweep_record, write_sweep
  spec = {"name": "full", "program": "p.py", "grid": {"k_pool": [50, 200]}}
  points = [{"values": {"k_pool": k}, "results_file": f"r{k}.json",
             "results": {"accuracy": acc, "n": n, "cost_usd": 1.0, "mean_cost_usd": 0.01,
                         "provenance": {"backend": "sim"}}} for k, acc in ((50, 100.0), (200, 0.0))]
  written = write_sweep(sweep_record(spec, points, {"command": "c"}), tmp_path)
  assert (tmp_path / "sweep_full.png").read_bytes()[:4] == b"\x89PNG" and len(written) == 3


def test_a_sweep_that_loads_an_untrained_main_run_is_refused_up_front_writing_nothing(tmp_path):
  spec = _fake_sweep(tmp_path, benchmark="math", pool="gpt-5-mini", seed=0, load_run="main",
                     run_root=str(tmp_path / "runs" / "t"), train_limit=8)
  path = _spec(tmp_path, spec)
  out = tmp_path / "results"
  proc = subprocess.run([sys.executable, str(REPO / "launch" / "sweep.py"), f"--spec={path}", "--mode=run",
                         f"--out_dir={out}"], capture_output=True, text=True, check=False,
                        env={**os.environ, "PYTHONPATH": str(REPO)})
  assert proc.returncode == 2, proc.stderr
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: sweep fake: --load_run=main needs the trained cell ")
  assert lines[0].endswith(f"train it first: python experiments/train_hieramas.py --benchmark=math "
                           f"--pool=gpt-5-mini --seed=0 --train_limit=8 --run_root={tmp_path / 'runs' / 't'}")
  assert not out.exists() and _calls(tmp_path) == []  # no point started, no table written
  # Once the main cell is trained, nothing is missing.
  from hieramas_jax.experiment.backend import sim_endpoint_name
  from hieramas_jax.experiment.rundir import safe_name
  cell = tmp_path / "runs" / "t" / safe_name(sim_endpoint_name(0)) / "main" / "seed0" / "gpt-5-mini" / "math"
  (cell / "hieramas").mkdir(parents=True)
  (cell / "hieramas" / "fit.json").write_text("{}")
  assert sweep.untrained_loads(spec) == []


@pytest.mark.parametrize("bad, message", [
    ("{not json", "malformed JSON"),
    ({"name": "s", "program": "p.py"}, "missing key 'grid'"),
    ({"name": "s", "program": "p.py", "grid": {"k": []}}, "non-empty lists"),
])
def test_bad_specs_give_one_clear_error_and_exit_2(tmp_path, bad, message):
  with pytest.raises(sweep.SweepSpecError, match=message):
    sweep.load_spec(_spec(tmp_path, bad))
  proc = subprocess.run([sys.executable, str(REPO / "launch" / "sweep.py"), f"--spec={_spec(tmp_path, bad)}"],
                        capture_output=True, text=True, check=False, env={**os.environ, "PYTHONPATH": str(REPO)})
  assert proc.returncode == 2
  assert proc.stderr.strip().startswith("error:") and message.split("'")[0] in proc.stderr


def test_committed_sweep_specs_load():
  for path in sorted((REPO / "launch" / "sweeps").glob("*.json")):
    spec = sweep.load_spec(str(path))
    assert sweep.grid_points(spec)


def test_a_loaded_run_refuses_every_training_difference_in_one_error():
  from hieramas_jax.experiment.runner import load_mismatch
  from hieramas_jax.methods.registry import make_method
  method = make_method("hieramas", benchmark="mmlu_redux", pool="gpt-5-mini", k_pool=50)
  base = {"cell": {"method": "hieramas", "benchmark": "mmlu_redux", "pool": "gpt-5-mini", "setting": "main",
                   "seed": 0, "tag": ""}, "endpoint": "sim:seed0:abc", "settings": {"temperature": 0.2},
          "data": {"benchmark": "d1", "split": "s1"}, "method_config": method.describe(),
          "splits": {"train": {"n": 512, "ids_sha256": "a"}, "val": {"n": 125, "ids_sha256": "b"},
                     "test": {"n": 250, "ids_sha256": "c"}}}
  mine = json.loads(json.dumps(base))
  mine["cell"]["tag"] = "k50"
  mine["splits"]["test"] = {"n": 8, "ids_sha256": "z"}  # test size and tag do not change training
  assert load_mismatch(base, mine, method) == []
  theirs = json.loads(json.dumps(base))
  theirs["splits"]["train"] = {"n": 2349, "ids_sha256": "all"}  # trained without --train_limit=512
  theirs["method_config"] = {**base["method_config"], "stage1_lr": 0.5, "k_pool": 200}  # K is inference-only
  theirs["settings"] = {"temperature": 0.7}
  diff = load_mismatch(theirs, mine, method)
  assert diff == ["train queries 2349 vs 512", 'settings {"temperature": 0.7} vs {"temperature": 0.2}',
                  "stage1_lr 0.5 vs 0.005"]  # the published MMLU-Redux lr


def _sync(tmp_path, env_extra, *args):
  env = {k: v for k, v in os.environ.items() if k not in ("WANDB_API_KEY", "WANDB_BASE_URL")}
  env["NETRC"] = str(tmp_path / "no-netrc")
  env["PYTHONPATH"] = str(REPO)  # this checkout's package, whichever one is installed
  return subprocess.run([sys.executable, str(REPO / "launch" / "wandb_sync.py"), f"--root={tmp_path / 'runs'}",
                         *args], capture_output=True, text=True, check=False, env={**env, **env_extra})


def test_wandb_sync_needs_a_key_and_lists_only_unsynced_offline_runs(tmp_path):
  for name, synced in (("offline-run-1-a", False), ("offline-run-2-b", True)):
    d = tmp_path / "runs" / "cell" / "wandb" / name
    d.mkdir(parents=True)
    (d / "run-x.wandb").write_bytes(b":W&B")
    if synced:
      (d / "run-x.wandb.synced").write_text("")
  proc = _sync(tmp_path, {})  # no key anywhere: refused, nothing uploaded
  assert proc.returncode == 2 and proc.stderr.startswith("error: no W&B key: run `wandb login`")
  for env in ({}, {"WANDB_API_KEY": "k" * 40}):  # --dry_run needs no key
    proc = _sync(tmp_path, env, "--dry_run")
    assert proc.returncode == 0, proc.stderr
    assert "1 offline W&B run(s) to upload" in proc.stdout and "offline-run-1-a" in proc.stdout
    assert "offline-run-2-b" not in proc.stdout
  # `wandb login` keeps the key in ~/.netrc: that is a key too (the upload itself is not tried here).
  netrc_file = tmp_path / "netrc"
  netrc_file.write_text("machine api.wandb.ai\n  login user\n  password " + "k" * 40 + "\n")
  netrc_file.chmod(0o600)
  proc = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'launch'); import wandb_sync; "
                         "print(wandb_sync.has_wandb_key())"], capture_output=True, text=True, check=False, cwd=REPO,
                        env={**{k: v for k, v in os.environ.items() if k != "WANDB_API_KEY"},
                             "NETRC": str(netrc_file)})
  assert proc.stdout.strip() == "True", proc.stderr


def test_a_path_flag_matches_the_way_a_result_records_it():
  """Results record a path outside the checkout as '<outside the repo>/<name>' (provenance.portable_value),
  so a point run with --extra=--run_root=/tmp/x is still finished when asked again."""
  assert sweep._same("<outside the repo>/runs", "/tmp/x/runs")  # pylint: disable=protected-access
  assert sweep._same("runs/table1", str(REPO / "runs" / "table1"))  # pylint: disable=protected-access
  assert not sweep._same("<outside the repo>/runs", "/tmp/x/other")  # pylint: disable=protected-access


def test_a_limited_sweep_point_reads_the_suffixed_results_file_its_program_writes(tmp_path):
  spec = sweep.load_spec(_spec(tmp_path, {"name": "s", "program": "experiments/train_hieramas.py",
                                          "flags": {"benchmark": "mmlu_redux", "pool": "gpt-5-mini", "tag": "k{k_pool}",
                                                    "train_limit": 512},
                                          "grid": {"k_pool": [50]}}))
  (point,) = sweep.grid_points(spec)
  assert sweep.results_file(spec, point).name == "hieramas_mmlu_redux_gpt-5-mini_k50.json"  # 512: the default
  assert sweep.results_file(spec, point, ("--limit=8",)).name == "hieramas_mmlu_redux_gpt-5-mini_k50_limit8.json"
  # Off the embedded sim the point's program writes under results/<pool file stem>/ (cli.route_results_off_sim).
  assert sweep.results_file(spec, point, ("--pool_file=launch/pools/local_smoke.toml",)) == \
      REPO / "results" / "local_smoke" / "hieramas_mmlu_redux_gpt-5-mini_k50.json"
  assert sweep.results_file(spec, point).parent == REPO / "results"


def test_a_sweep_with_a_seed_axis_reads_each_seeds_own_results_file(tmp_path):
  spec = sweep.load_spec(_spec(tmp_path, {"name": "s", "program": "experiments/train_hieramas.py",
                                          "flags": {"benchmark": "mmlu_redux", "pool": "gpt-5-mini", "tag": "w{num_proposers}"},
                                          "grid": {"num_proposers": [6], "seed": [0, 2]}}))
  names = sorted(sweep.results_file(spec, point).name for point in sweep.grid_points(spec))
  assert names == ["hieramas_mmlu_redux_gpt-5-mini_w6.json", "hieramas_mmlu_redux_gpt-5-mini_w6_seed2.json"]
  (seed2,) = [p for p in sweep.grid_points(spec) if p["seed"] == 2]
  assert sweep.results_file(spec, seed2, ("--limit=8",)).name == "hieramas_mmlu_redux_gpt-5-mini_w6_seed2_limit8.json"
