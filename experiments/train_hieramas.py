"""Train HieraMAS (stage 1 + stage 2) on one benchmark and evaluate it on the test split.

  python experiments/train_hieramas.py --benchmark=mmlu_redux --pool=gpt-5-mini
  python experiments/train_hieramas.py --flagfile=experiments/ablations/wo_graph.flags --benchmark=math
  python experiments/train_hieramas.py --benchmark=math --stage1_steps=4 --train_limit=16 --test_limit=8 --wandb=false

Every field of `HieraMASConfig` is a flag of the same name (help text from its docstring). Writes the
run directory `<run_root>/<run_name>/` (config.json, metrics.jsonl, checkpoints, chosen.jsonl,
items.jsonl, traces.jsonl) and `<out_dir>/hieramas_<benchmark>_<pool>[_<tag>].json` with provenance
and this command. On the embedded simulated pool by default (results labelled "simulated pool").
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re

from absl import app, flags

from hieramas_jax.benchmarks.data import BENCHMARKS
from hieramas_jax.experiment.backend import BACKEND_FLAG_NAMES, open_backend
from hieramas_jax.experiment.cli import parse_flags_or_exit, run_or_exit, selected_flags
from hieramas_jax.experiment.table1 import RunConfigMismatchError
from hieramas_jax.llm.endpoint import define_backend_flags
from hieramas_jax.llm.registry import POOLS
from hieramas_jax.methods.hieramas.config import (ACTIVATION_CREDIT, GRAPH_MODES, LLM_MODES, SELECT_BY, HieraMASConfig,
                                                  HieraMASConfigError)
from hieramas_jax.paths import REPO_DIR, RESULTS_DIR

FLAGS = flags.FLAGS
_ENUMS = {"benchmark": BENCHMARKS, "pool": tuple(POOLS), "graph_mode": GRAPH_MODES, "llm_mode": LLM_MODES,
          "stage1_select_by": SELECT_BY, "activation_credit": ACTIVATION_CREDIT}


def _attribute_help() -> dict[str, str]:
  """`name: text` lines of HieraMASConfig's docstring (so flag help and the config never drift apart)."""
  helps, current = {}, []
  for line in (HieraMASConfig.__doc__ or "").split("Attributes:")[-1].splitlines():
    m = re.match(r"^    ([a-z0-9_, ]+): (.*)$", line)
    if m:
      current = [n.strip() for n in m.group(1).split(",")]
      for n in current:
        helps[n] = m.group(2)
    elif line.startswith("      ") and current:
      for n in current:
        helps[n] += " " + line.strip()
  return helps


def define_config_flags() -> tuple[str, ...]:
  helps = _attribute_help()
  names = []
  for field in dataclasses.fields(HieraMASConfig):
    name, default, text = field.name, field.default, helps.get(field.name, "see HieraMASConfig")
    if name in _ENUMS:
      flags.DEFINE_enum(name, default, list(_ENUMS[name]), text)
    elif isinstance(default, bool):
      flags.DEFINE_bool(name, default, text)
    elif isinstance(default, int):
      flags.DEFINE_integer(name, default, text)
    elif isinstance(default, float):
      flags.DEFINE_float(name, default, text)
    else:
      flags.DEFINE_string(name, default, text)
    names.append(name)
  return tuple(names)


CONFIG_FLAGS = define_config_flags()
flags.DEFINE_string("run_name", None, "Run directory name under --run_root (default <benchmark>_<pool>_seed<seed>"
                    "[_<tag>]).")
flags.DEFINE_string("tag", "", "Suffix of the results file and default run name; may name config fields, "
                    "e.g. 'k{k_pool}' -> 'k50'.")
flags.DEFINE_string("load_run", None, "Take the trained policy and classifier from this finished run directory "
                    "(no training; training settings must match). May name config fields, e.g. "
                    "'runs/hieramas/{benchmark}_{pool}_seed{seed}'.")
flags.DEFINE_string("run_root", str(REPO_DIR / "runs" / "hieramas"), "Parent of run directories.")
flags.DEFINE_string("out_dir", str(RESULTS_DIR), "Where hieramas_<benchmark>_<pool>[_<tag>].json is written.")
flags.DEFINE_integer("train_limit", None, "Use only the first N training queries (quick runs).", lower_bound=1)
flags.DEFINE_integer("val_limit", None, "Use only the first N validation queries.", lower_bound=1)
flags.DEFINE_integer("test_limit", None, "Use only the first N test queries.", lower_bound=1)
flags.DEFINE_bool("wandb", True, "Mirror metrics to W&B (mode from WANDB_MODE, default offline).")
flags.DEFINE_bool("progress", True, "Show progress bars.")
define_backend_flags()

RUN_FLAGS = CONFIG_FLAGS + ("run_name", "tag", "load_run", "run_root", "out_dir", "train_limit", "val_limit",
                            "test_limit", "wandb") + BACKEND_FLAG_NAMES


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  logging.getLogger().setLevel(logging.INFO)
  from hieramas_jax.benchmarks.splits import load_split  # pylint: disable=import-outside-toplevel
  from hieramas_jax.methods.hieramas.run import results_name, train_and_evaluate  # pylint: disable=import-outside-toplevel
  cfg = run_or_exit(lambda: HieraMASConfig(**{n: FLAGS[n].value for n in CONFIG_FLAGS}), (HieraMASConfigError,))
  tag = run_or_exit(lambda: results_name(cfg, FLAGS.tag), (KeyError, ValueError))
  run_name = FLAGS.run_name or f"{tag.removeprefix('hieramas_')}_seed{cfg.seed}"
  load_run = run_or_exit(lambda: FLAGS.load_run.format(**cfg.to_json()), (KeyError, ValueError)) \
      if FLAGS.load_run else None
  # Compiled XLA executables persist across runs: ablations and sweep points reuse them.
  import jax  # pylint: disable=import-outside-toplevel
  from hieramas_jax.paths import cache_dir  # pylint: disable=import-outside-toplevel
  jax.config.update("jax_compilation_cache_dir", str(cache_dir() / "jax-compile"))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
  splits = {}
  for part, limit in (("train", FLAGS.train_limit), ("val", FLAGS.val_limit), ("test", FLAGS.test_limit)):
    items = list(load_split(cfg.benchmark, part))
    splits[part] = items[:limit] if limit else items
  run_flags = selected_flags(FLAGS, RUN_FLAGS)

  async def go():
    async with open_backend(FLAGS, seed=cfg.seed) as backend:
      return await train_and_evaluate(cfg, backend, **splits, run_dir=f"{FLAGS.run_root}/{run_name}",
                                      out_dir=FLAGS.out_dir, flags=run_flags, tag=FLAGS.tag, use_wandb=FLAGS.wandb,
                                      run_name=run_name, progress=FLAGS.progress, load_run=load_run)

  from hieramas_jax.learn.stage2 import Stage2Error  # pylint: disable=import-outside-toplevel
  from hieramas_jax.methods.hieramas.method import HieraMASError  # pylint: disable=import-outside-toplevel
  from hieramas_jax.methods.hieramas.training import TrainingError  # pylint: disable=import-outside-toplevel
  record = run_or_exit(lambda: asyncio.run(go()), (RunConfigMismatchError, HieraMASError, TrainingError, Stage2Error))
  print(f"wrote {FLAGS.out_dir}/{tag}.json: accuracy {record['accuracy']:.2f}% on n={record['n']}, "
        f"cost ${record['cost_usd']:.4f}, mean system reward {record['mean_system_reward']:.3f} "
        f"[{record['provenance'].get('label', record['provenance']['backend'])}]")


if __name__ == "__main__":
  app.run(main, flags_parser=parse_flags_or_exit)
