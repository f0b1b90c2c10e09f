"""Which Table 1 orderings survive the simulated pool's uncertainty: low / fitted / high profiles.

  python experiments/sim_sensitivity.py                     # make sim-sensitivity (the lead's full run)
  python experiments/sim_sensitivity.py --methods=sc_cot,debate --benchmarks=math --pools=gpt-5-mini \\
      --limit=4 --out_dir=/tmp/sens --wandb=false            # a tiny check

Runs the multi-agent rows of Table 1 and HieraMAS (with SC+CoT, the paper's reference for Full-Graph's
sign) once per aggregation profile of the embedded sim (`sim.params.PROFILES`), each through the same
runner as `reproduce_table1.py` (each profile is its own endpoint name, so its own run directories and
cache keys; a killed run resumes), then writes <out_dir>/sim_sensitivity.{md,json} (`report/sensitivity.py`).
Only --backend=sim makes sense here: a real endpoint has no profiles (exit 2).
"""

from __future__ import annotations

import types

from absl import flags

from hieramas_jax.experiment import cli
from hieramas_jax.experiment.backend import BACKEND_FLAG_NAMES
from hieramas_jax.experiment.cli import LIMITED_ROOT_HELP, default_run_root, refuse_cut_run, run_spec, selected_flags
from hieramas_jax.experiment.console import define_verbose_flag
from hieramas_jax.experiment.provenance import provenance
from hieramas_jax.experiment.rundir import repo_relative
from hieramas_jax.experiment.spec import InvalidRunError, TableSpec
from hieramas_jax.fileio import atomic_write_json, atomic_write_text
from hieramas_jax.llm.endpoint import define_backend_flags
from hieramas_jax.paths import REPO_DIR, RESULTS_DIR
from hieramas_jax.report.sensitivity import PROFILE_ORDER, sensitivity_markdown, sensitivity_record
from hieramas_jax.sim.params import PROFILES

MULTI_AGENT_ROWS = ("sc_cot", "debate", "full_graph", "random_graph", "gdesigner", "masrouter", "aflow", "hieramas")

FLAGS = flags.FLAGS
flags.DEFINE_list("methods", list(MULTI_AGENT_ROWS), "Methods (registry names).")
flags.DEFINE_list("benchmarks", ["humaneval_plus", "math", "mmlu_redux"], "Benchmarks.")
flags.DEFINE_list("pools", ["gpt-5-mini", "qwen3-80b"], "Table 1 settings.")
flags.DEFINE_list("profiles", list(PROFILE_ORDER), "Sim aggregation profiles to compare.")
flags.DEFINE_integer("seed", 0, "The run's seed (and the sim's).")
flags.DEFINE_integer("limit", None, "Only the first N test queries of each benchmark (quick runs).")
flags.DEFINE_integer("train_limit", None, "Only the first N training queries of every benchmark.")
flags.DEFINE_string("out_dir", str(RESULTS_DIR), "Where sim_sensitivity.{md,json} are written.")
flags.DEFINE_string("run_root", str(REPO_DIR / "runs" / "sim_sensitivity"), "Parent of the run directories."
                    + LIMITED_ROOT_HELP)
flags.DEFINE_integer("max_queries", 64, "Most queries in flight at once.", lower_bound=1)
flags.DEFINE_bool("sim_process", True, "Serve the sim from its own process.")
flags.DEFINE_bool("wandb", True, "Each cell its own W&B run (offline unless configured).")
flags.DEFINE_bool("progress", True, "Show progress bars.")
define_backend_flags()
define_verbose_flag()

RUN_FLAGS = ("methods", "benchmarks", "pools", "profiles", "seed", "limit", "train_limit", "out_dir", "run_root",
             "max_queries", "sim_process", "wandb") + BACKEND_FLAG_NAMES


def check_flags() -> TableSpec:
  if FLAGS.backend != "sim" or FLAGS.base_url:
    raise InvalidRunError("sim_sensitivity compares the embedded sim's profiles: use --backend=sim, no --base_url")
  unknown = [p for p in FLAGS.profiles if p not in PROFILES]
  if unknown:
    raise InvalidRunError(f"unknown --profiles {unknown}; known: {', '.join(PROFILES)}")
  train_limit = {b: FLAGS.train_limit for b in FLAGS.benchmarks} if FLAGS.train_limit else {}
  spec = TableSpec(methods=tuple(FLAGS.methods), benchmarks=tuple(FLAGS.benchmarks), pools=tuple(FLAGS.pools),
                   setting="main", seeds=(FLAGS.seed,), train_limit=train_limit, val_limit=None,
                   test_limit=FLAGS.limit, method_options={})
  refuse_cut_run(FLAGS, ("methods", "benchmarks", "pools", "profiles"), out_flag="out_dir",
                 suffix=spec.results_suffix(), overwrites=f"{repo_relative(FLAGS.out_dir)}/sim_sensitivity.json")
  return spec


def main():
  spec = check_flags()
  run_flags = selected_flags(FLAGS, RUN_FLAGS)
  records = {}
  for profile in FLAGS.profiles:
    backend_flags = types.SimpleNamespace(**{**{n: FLAGS[n].value for n in BACKEND_FLAG_NAMES}, "sim_profile": profile})
    records[profile] = run_spec(spec, FLAGS, backend_flags=backend_flags, needed_models=False,
                                run_root=default_run_root(FLAGS, spec), flags={**run_flags, "sim_profile": profile},
                                max_queries=FLAGS.max_queries, progress=FLAGS.progress, use_wandb=FLAGS.wandb,
                                sim_process=FLAGS.sim_process)
  record = sensitivity_record(records, provenance(seed=FLAGS.seed, benchmarks=FLAGS.benchmarks, flags=run_flags,
                                                  backend="sim"))
  record["endpoints"] = {p: r["endpoint"] for p, r in records.items()}
  suffix = spec.results_suffix()
  out = f"{FLAGS.out_dir}/sim_sensitivity{suffix}"
  atomic_write_json(f"{out}.json", record)
  atomic_write_text(f"{out}.md", sensitivity_markdown(record))
  print(f"wrote {out}.json and .md: {record['n_hold']} orderings hold, {record['n_flip']} flip, "
        f"{record['n_unsettled']} unsettled, {record['n_tie']} tie")


if __name__ == "__main__":
  cli.run(main)
