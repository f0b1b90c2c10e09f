"""Train HieraMAS (stage 1 + stage 2) on one benchmark and evaluate it on the test split: one runner cell.

  python experiments/train_hieramas.py --benchmark=mmlu_redux --pool=gpt-5-mini
  python experiments/train_hieramas.py --flagfile=experiments/ablations/wo_graph.flags --benchmark=math
  python experiments/train_hieramas.py --benchmark=math --stage1_steps=4 --train_limit=16 --limit=8

Every field of `HieraMASConfig` is a flag of the same name (help text from its docstring). The cell runs
through the same runner as `reproduce_table1.py` (`experiment.runner`), into the same run root by
default, so the untagged cell is the HieraMAS cell of Table 1 (trained once, used by both). Writes
`<out_dir>/hieramas_<benchmark>_<pool>[_<tag>].json` (the Table 1 figures plus mean system reward,
chosen graphs and LLM preferences) with provenance and this command; a run with limits adds their suffix
(`_limit4_train8_val4`), so it never overwrites a full-size result. On the embedded simulated pool by
default (results labelled "simulated pool").
"""

from __future__ import annotations

import dataclasses
import pathlib
import re

from absl import flags

from hieramas_jax.benchmarks.data import BENCHMARKS
from hieramas_jax.experiment import cli
from hieramas_jax.experiment.backend import BACKEND_FLAG_NAMES
from hieramas_jax.experiment.cli import LIMITED_ROOT_HELP, default_run_root, run_spec, selected_flags
from hieramas_jax.experiment.console import define_verbose_flag
from hieramas_jax.experiment.rundir import from_repo, safe_name
from hieramas_jax.experiment.spec import SAME_RUN_UNTAGGED, InvalidRunError, TableSpec
from hieramas_jax.fileio import atomic_write_json
from hieramas_jax.llm.endpoint import define_backend_flags
from hieramas_jax.llm.registry import POOLS
from hieramas_jax.mas.roles import roles_for
from hieramas_jax.methods.hieramas.config import CHOICES, HieraMASConfig
from hieramas_jax.paths import REPO_DIR, RESULTS_DIR
from hieramas_jax.report import hieramas as hieramas_report
from hieramas_jax.report import learning

FLAGS = flags.FLAGS
_ENUMS = {"benchmark": BENCHMARKS, "pool": tuple(POOLS), **CHOICES}
# Config fields that name the cell rather than the method.
CELL_FIELDS = ("benchmark", "pool", "seed")


def _attribute_help() -> dict[str, str]:
  """`name: text` lines of HieraMASConfig's docstring (so flag help and the config never drift apart)."""
  helps, current = {}, []
  for line in (HieraMASConfig.__doc__ or "").split("Attributes:")[-1].splitlines():
    # A field line is "    name: text" (or "    a, b: text"); a continuation is indented further, and may
    # itself hold "word: " (e.g. `"role" (the` / `reference: ...`), which must not read as a new field.
    m = re.match(r"^    ([a-z0-9_]+(?:, [a-z0-9_]+)*): (.*)$", line)
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
flags.DEFINE_string("tag", "", "The variant's name: suffix of the results file and the cell's run directory; may "
                    "name config fields, e.g. 'k{k_pool}' -> 'k50'.")
flags.DEFINE_string("run_name", None, "Names the cell's run directory instead of --tag (sweep points).")
flags.DEFINE_string("load_run", None, f"Take the trained policy and classifier from a finished HieraMAS cell instead "
                    f"of training: '{SAME_RUN_UNTAGGED}' for the untagged cell of the same run root, benchmark, pool "
                    "and seed, or a cell's run directory (may name config fields). Training settings and data "
                    "sizes must match.")
flags.DEFINE_string("run_root", str(REPO_DIR / "runs" / "table1"), "Parent of the run directories (Table 1's)."
                    + LIMITED_ROOT_HELP)
flags.DEFINE_string("out_dir", str(RESULTS_DIR), "Where hieramas_<benchmark>_<pool>[_<tag>].json is written.")
flags.DEFINE_integer("train_limit", None, "Use only the first N training queries (default: all; MMLU-Redux 512).",
                     lower_bound=1)
flags.DEFINE_integer("val_limit", None, "Use only the first N validation queries.", lower_bound=1)
flags.DEFINE_integer("limit", None, "Use only the first N test queries (the same flag as reproduce_table1's).",
                     lower_bound=1)
flags.DEFINE_bool("sim_process", True, "Serve the embedded sim from its own process.")
flags.DEFINE_bool("wandb", True, "The cell and each training stage its own W&B run (offline unless WANDB_MODE=online "
                  "or WANDB_API_KEY is set; `make wandb-sync` uploads offline runs).")
flags.DEFINE_bool("progress", True, "Show progress bars.")
define_backend_flags()
define_verbose_flag()

RUN_FLAGS = CONFIG_FLAGS + ("tag", "run_name", "load_run", "run_root", "out_dir", "train_limit", "val_limit",
                            "limit", "sim_process", "wandb") + BACKEND_FLAG_NAMES


def _format(template: str, flag: str, cfg: HieraMASConfig) -> str:
  """--tag / --load_run with config fields filled in ('k{k_pool}' -> 'k50'); a bad template is a user error."""
  try:
    return template.format(**cfg.to_json())
  except (KeyError, ValueError, IndexError) as e:
    raise InvalidRunError(f"--{flag}={template!r} does not fill from HieraMASConfig's fields: "
                          f"{type(e).__name__}: {e}") from None


def build_spec(cfg: HieraMASConfig, tag: str) -> TableSpec:
  load_run = _format(FLAGS.load_run, "load_run", cfg) if FLAGS.load_run else None
  options = {k: v for k, v in cfg.to_json().items() if k not in CELL_FIELDS}
  return TableSpec(methods=("hieramas",), benchmarks=(cfg.benchmark,), pools=(cfg.pool,), setting="main",
                   seeds=(cfg.seed,), train_limit={cfg.benchmark: FLAGS.train_limit} if FLAGS.train_limit else {},
                   val_limit=FLAGS.val_limit, test_limit=FLAGS.limit, method_options={"hieramas": options},
                   tag=safe_name(FLAGS.run_name, "_") if FLAGS.run_name else tag,
                   load_from={"hieramas": load_run} if load_run else {})


def main():
  cfg = HieraMASConfig(**{n: FLAGS[n].value for n in CONFIG_FLAGS})
  tag = _format(FLAGS.tag, "tag", cfg)
  spec = build_spec(cfg, tag)
  table = run_spec(spec, FLAGS, run_root=default_run_root(FLAGS, spec), flags=selected_flags(FLAGS, RUN_FLAGS),
                   max_queries=cfg.max_queries, progress=FLAGS.progress, use_wandb=FLAGS.wandb,
                   sim_process=FLAGS.sim_process)
  (cell,) = table["cells"].values()
  records = hieramas_report.read_items(from_repo(cell["run_dir"]))
  record = hieramas_report.results_record(cell, records, cfg.to_json(), roles_for(cfg.benchmark), cell["sizes"],
                                          table["provenance"])
  path = f"{FLAGS.out_dir}/{hieramas_report.results_name(cfg.benchmark, cfg.pool, tag, cfg.seed)}{spec.results_suffix()}.json"
  atomic_write_json(path, record)
  print(f"wrote {path}: accuracy {record['accuracy']:.2f}% on n={record['n']}, cost ${record['cost_usd']:.4f}, "
        f"mean system reward {record['mean_system_reward']:.3f} "
        f"[{record['provenance'].get('label', record['provenance']['backend'])}]")
  verdicts = learning.cell_verdicts(record["fit"], pathlib.Path(path).name)
  print(f"stage 1: {learning.stage1_text(verdicts['stage1'])}\nstage 2: {learning.stage2_text(verdicts['stage2'])}")


if __name__ == "__main__":
  cli.run(main, jax_cache=True)
