"""Paper Tables 2, 6 and 7 from the HieraMAS results files of the ablation cells (never typed by hand).

Each ablation is a flag set (`experiments/ablations/*.flags`) whose run writes
`results/hieramas_<benchmark>_<pool>_<tag>.json`; the untagged file is the main run. A table lines up,
for every benchmark and pool setting that has a main run, the rows the paper compares:

- Table 2 (components): HieraMAS, w/o Graph (`wo_graph`), w/o LLM Selection (`wo_llm_selection`);
- Table 6 (proposers per supernode W): the main run (W = 2), `w6`, `w8`;
- Table 7 (graph pool size K): `k50`, the main run (the benchmark's reference K), `k500`.

A row whose file is missing prints "-" and the command that makes it; each table carries its own
provenance (the command that built it) and every source file's command and commit.
"""

from __future__ import annotations

import json
import pathlib
import re
from typing import Any, Mapping, Sequence

from hieramas_jax.benchmarks.data import BENCHMARK_TITLES
from hieramas_jax.experiment.provenance import sim_title
from hieramas_jax.fileio import atomic_write_json, atomic_write_text
from hieramas_jax.report import learning
from hieramas_jax.report.hieramas import results_name
from hieramas_jax.report.markdown import provenance_lines
from hieramas_jax.report.paper import POOL_TITLES
from hieramas_jax.report.stats import correct_vector



def _row(tag: str, title: str, flagfile: str | None):
  return {"tag": tag, "title": title, "flagfile": flagfile}


TABLES = {
    "table2": {"title": "Table 2 (ablation of HieraMAS's components)",
               "rows": [_row("", "HieraMAS", None), _row("wo_graph", "w/o Graph (one random graph, one run)",
                                                         "wo_graph"),
                        _row("wo_llm_selection", "w/o LLM Selection (strong model everywhere)", "wo_llm_selection")]},
    "table6": {"title": "Table 6 (proposers per supernode W)",
               "rows": [_row("", "W = 2 (main run)", None), _row("w6", "W = 6", "proposers_6"),
                        _row("w8", "W = 8", "proposers_8")]},
    "table7": {"title": "Table 7 (graph pool size K at inference)",
               "rows": [_row("k50", "K = 50", "k_50"), _row("", "K = reference (main run)", None),
                        _row("k500", "K = 500", "k_500")]},
}
# The paper's published figures (real LLMs; accuracy %, total test-split cost in USD or None) and the columns it
# reports, GPT-5-Mini setting: Table 2 on MATH and MMLU-Redux, Tables 6 and 7 on MMLU-Redux. Other settings
# appear only where an ablation file exists for them.
PAPER = {
    "table2": {("math", "gpt-5-mini"): {"": (96.67, 1.52), "wo_graph": (93.33, 1.57),
                                        "wo_llm_selection": (97.78, 2.56)},
               ("mmlu_redux", "gpt-5-mini"): {"": (95.20, 1.29), "wo_graph": (92.00, 1.36),
                                              "wo_llm_selection": (94.40, 3.92)}},
    "table6": {("mmlu_redux", "gpt-5-mini"): {"": (95.20, 1.29), "w6": (91.20, 1.97), "w8": (88.80, 2.32)}},
    "table7": {("mmlu_redux", "gpt-5-mini"): {"k50": (93.60, None), "": (95.60, None), "k500": (94.40, None)}},
}
FIELDS = ("accuracy", "n", "mean_cost_usd", "mean_system_reward", "mean_active_roles", "num_roles",
          "num_candidates")


def results_path(results_dir: pathlib.Path, benchmark: str, pool: str, tag: str, seed: int = 0) -> pathlib.Path:
  return results_dir / f"{results_name(benchmark, pool, tag, seed)}.json"


def seed_paths(results_dir: pathlib.Path, benchmark: str, pool: str, tag: str) -> dict[int, pathlib.Path]:
  """{seed: results file} of one cell: seed 0's plain file and every `_seed<n>` file beside it."""
  base = results_name(benchmark, pool, tag)
  found = {0: results_dir / f"{base}.json"} if (results_dir / f"{base}.json").exists() else {}
  for path in results_dir.glob(f"{base}_seed*.json"):
    match = re.fullmatch(re.escape(base) + r"_seed(\d+)\.json", path.name)
    if match:
      found[int(match.group(1))] = path
  return dict(sorted(found.items()))


def seed_summary(results_dir: pathlib.Path, benchmark: str, pool: str, tag: str) -> dict[str, Any]:
  """A cell over its seeds: accuracy mean +- sd and, for a tagged row, the per-seed paired difference from
  the main run of the same seed (same test queries), tested across seeds (`learning.seed_comparison`)."""
  accs, deltas = [], []
  for seed, path in seed_paths(results_dir, benchmark, pool, tag).items():
    r = json.loads(path.read_text())
    accs.append(r.get("accuracy"))
    main_path = results_path(results_dir, benchmark, pool, "", seed)
    if tag and main_path.exists():
      main = json.loads(main_path.read_text())
      mine, theirs = r.get("outcomes"), main.get("outcomes")
      if mine and theirs and mine.get("ids_sha256") == theirs.get("ids_sha256"):
        deltas.append(100.0 * (correct_vector(r).mean() - correct_vector(main).mean()))
  accs = [a for a in accs if a is not None]
  return {"across_seeds": learning.across_seeds(accs) if accs else None,
          "vs_main_across_seeds": learning.seed_comparison(deltas)}


def main_settings(results_dir: pathlib.Path) -> list[tuple[str, str]]:
  """(benchmark, pool) of every main-run results file, in the paper's column order."""
  out = []
  for b in BENCHMARK_TITLES:
    for p in POOL_TITLES:
      if results_path(results_dir, b, p, "").exists():
        out.append((b, p))
  return out


def _command(flagfile: str | None, benchmark: str, pool: str) -> str:
  cmd = "python experiments/train_hieramas.py"
  if flagfile:
    cmd += f" --flagfile=experiments/ablations/{flagfile}.flags"
  cmd += f" --benchmark={benchmark} --pool={pool}"
  return cmd + (" --train_limit=512" if benchmark == "mmlu_redux" else "")


def ablation_record(name: str, results_dir: str | pathlib.Path, prov: Mapping[str, Any]) -> dict[str, Any]:
  """One table's cells from the results files (missing ones recorded with the command that makes them)."""
  results_dir = pathlib.Path(results_dir)
  spec = TABLES[name]
  scope = PAPER[name]
  tagged = [r["tag"] for r in spec["rows"] if r["tag"]]
  settings = [s for s in main_settings(results_dir)
              if s in scope or any(results_path(results_dir, *s, t).exists() for t in tagged)]
  cells, sources, backends, verdicts = {}, {}, set(), {}
  for b, p in settings:
    main_path = results_path(results_dir, b, p, "")
    main = json.loads(main_path.read_text()) if main_path.exists() else {}
    verdicts[f"{b}|{p}"] = learning.cell_verdicts(main.get("fit"), main_path.name)
    for row in spec["rows"]:
      path = results_path(results_dir, b, p, row["tag"])
      key = f"{row['tag'] or 'main'}|{b}|{p}"
      if not path.exists():
        cells[key] = {"missing": True, "file": path.name, "command": _command(row["flagfile"], b, p)}
        continue
      r = json.loads(path.read_text())
      rp = r.get("provenance") or {}
      backends.add(rp.get("backend"))
      cells[key] = {"missing": False, "file": path.name, **{f: r.get(f) for f in FIELDS},
                    "mean_graph_density": (r.get("graph_density") or {}).get("mean"),
                    "loaded_from": r.get("loaded_from"),
                    "vs_main": None if not row["tag"] else learning.compare_rows(r.get("outcomes"),
                                                                                 main.get("outcomes"), path.name),
                    **seed_summary(results_dir, b, p, row["tag"])}
      sources[path.name] = {"command": rp.get("command"), "git": rp.get("git"), "backend": rp.get("backend")}
  backend = ",".join(sorted(b for b in backends if b)) or None
  paper = {f"{tag or 'main'}|{b}|{p}": {"accuracy": acc, "total_cost_usd": cost}
           for (b, p), rows in scope.items() for tag, (acc, cost) in rows.items()}
  return {"table": name, "title": spec["title"], "rows": spec["rows"], "settings": [list(s) for s in settings],
          "cells": cells, "paper": paper, "backend": backend, "sources": sources, "verdicts": verdicts,
          "provenance": dict(prov)}


def _fmt(v, spec: str) -> str:
  return "-" if v is None else format(v, spec)


def ablation_markdown(record: Mapping[str, Any]) -> str:
  sim = record.get("backend") == "sim"
  lines = [f"# {record['title']}" + (f" - {sim_title(record)}" if sim else ""), ""]
  if sim:
    lines += ["**Simulated pool (hieramas_jax.sim): not real LLM results.** Built from the HieraMAS results files "
              "of the ablation runs (`experiments/ablations/*.flags`); inference-only rows load the main run's "
              "models.", ""]
  if not record["settings"]:
    lines += ["No main HieraMAS results file (`results/hieramas_<benchmark>_<pool>.json`) yet: run "
              "`python experiments/train_hieramas.py --benchmark=mmlu_redux --train_limit=512` first.", ""]
  lines += ["Cell: accuracy % · $ over the test split ($/query) · mean system reward · active roles (of the "
            "benchmark's roles) · mean density of the chosen graph. `-`: not run yet (the command is listed below "
            "the table). *paper*: the published figure (real LLMs; accuracy % · $ over the test split). "
            "(vs comparison ...): the row's paired difference from the main run on the same test queries, in "
            "accuracy points, with its 95% bootstrap interval; *inside noise* when the interval holds 0. With "
            "several seeds (results files `_seed<n>`, each an independent simulated world): accuracy mean ± sd "
            "over seeds and the per-seed paired difference from the main run, mean with its 95% t interval "
            "across seeds.", ""]
  columns = [tuple(s) for s in record["settings"]]
  paper = record.get("paper") or {}
  with_paper = {(b, p) for b, p in columns if any(k.endswith(f"|{b}|{p}") for k in paper)}
  heads = []
  for b, p in columns:
    heads.append(f"{BENCHMARK_TITLES.get(b, b)} {POOL_TITLES.get(p, p)}")
    if (b, p) in with_paper:
      heads.append("*paper*")
  lines += ["| Row | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
  missing = []
  for row in record["rows"]:
    out = []
    for b, p in columns:
      key = f"{row['tag'] or 'main'}|{b}|{p}"
      c = record["cells"][key]
      if c["missing"]:
        out.append("-")
        missing.append(c["command"])
      else:
        total = c["mean_cost_usd"] * c["n"] if c.get("mean_cost_usd") is not None and c.get("n") else None
        out.append(f"{_fmt(c['accuracy'], '.2f')} · ${_fmt(total, '.2f')} (${_fmt(c['mean_cost_usd'], '.5f')}) · "
                   f"{_fmt(c['mean_system_reward'], '.3f')} · {_fmt(c['mean_active_roles'], '.2f')}/"
                   f"{c.get('num_roles') or '-'} · {_fmt(c['mean_graph_density'], '.2f')}"
                   + learning.noise_text(c.get("vs_main"))
                   + learning.seeds_text(c.get("across_seeds"), c.get("vs_main_across_seeds")))
      if (b, p) in with_paper:
        pub = paper.get(key)
        out.append("-" if pub is None else f"*{_fmt(pub['accuracy'], '.2f')}*"
                   + (f" · *${_fmt(pub['total_cost_usd'], '.2f')}*" if pub["total_cost_usd"] is not None else ""))
    lines.append(f"| {row['title']} | " + " | ".join(out) + " |")
  if missing:
    lines += ["", "Not run yet:", "", "```"] + missing + ["```"]
  lines += verdict_lines(record.get("verdicts") or {})
  lines += ["", "## Sources", "", "| File | Command | Commit |", "|---|---|---|"]
  for name, src in sorted(record["sources"].items()):
    commit = ((src.get("git") or {}).get("commit") or "")[:12]
    lines.append(f"| `results/{name}` | `{src.get('command')}` | {commit} |")
  lines += provenance_lines(record["provenance"])
  return "\n".join(lines)


def verdict_lines(verdicts: Mapping[str, Any]) -> list[str]:
  """Markdown: each setting's main-run learning verdicts (report/learning.py), the rows' common model."""
  if not verdicts:
    return []
  lines = ["", "## Did the main run learn?", "",
           "Stage 1: the trained policy (last step) against the untrained one on the same validation queries "
           "(paired, 95% interval). Stage 2: the classifier's top-1 hit on its validation queries against chance "
           "and a fresh initialisation. A row that only changes inference loads these models.", "",
           "| Setting | Stage 1 (policy) | Stage 2 (classifier) |", "|---|---|---|"]
  for key, v in verdicts.items():
    b, p = key.split("|")
    lines.append(f"| {BENCHMARK_TITLES.get(b, b)} {POOL_TITLES.get(p, p)} | {learning.stage1_text(v['stage1'])} | "
                 f"{learning.stage2_text(v['stage2'])} |")
  return lines


def write_ablation_tables(results_dir: str | pathlib.Path, out_dir: str | pathlib.Path, prov: Mapping[str, Any],
                          names: Sequence[str] = tuple(TABLES)) -> list[pathlib.Path]:
  """<out_dir>/table2|table6|table7.{json,md}."""
  written = []
  for name in names:
    record = ablation_record(name, results_dir, prov)
    written += _write_pair(out_dir, name, record, ablation_markdown(record))
  return written


def _sans_provenance(record: Mapping[str, Any] | pathlib.Path) -> str | None:
  """The record (or the one a file holds) without its provenance, as canonical JSON (NaN compares equal)."""
  if isinstance(record, pathlib.Path):
    try:
      record = json.loads(record.read_text())
    except (OSError, json.JSONDecodeError):
      return None
    if not isinstance(record, dict):
      return None
  return json.dumps({k: v for k, v in record.items() if k != "provenance"}, sort_keys=True)


def _write_pair(out_dir: str | pathlib.Path, name: str, record: Mapping[str, Any], markdown: str
                ) -> list[pathlib.Path]:
  """<out_dir>/<name>.json (the record) and <name>.md (its table), each written atomically.

  When the files there hold the same record but for its provenance (when and by which command or commit
  it was last built), they are kept as they are: regenerating the report does not dirty committed files
  when nothing but the time changed.
  """
  out_dir = pathlib.Path(out_dir)
  if (out_dir / f"{name}.md").exists() and _sans_provenance(out_dir / f"{name}.json") == _sans_provenance(record):
    return []
  atomic_write_json(out_dir / f"{name}.json", record)
  atomic_write_text(out_dir / f"{name}.md", markdown)
  return [out_dir / f"{name}.json", out_dir / f"{name}.md"]


# HieraMAS recipes compared on validation. The tag of each recipe's results files; the main run is the
# published default. The comparison informs; it does not choose the default (the paper and reference do).
STAGE1_RECIPES = (("published", "", "HieraMAS as published (decision-cost reward, role credit, no baseline, "
                   "no skip prior, the reference's budgets and inference rule)"),
                  ("total-cost", "total_cost", "this suite's earlier recipe, beyond the paper "
                   "(`experiments/ablations/total_cost.flags`)"))


def stage1_recipe_record(results_dir: str | pathlib.Path, prov: Mapping[str, Any]) -> dict[str, Any]:
  """The stage-1 recipes side by side on the validation split (the best checkpoint's mean system reward,
  the selection metric), in every setting where both ran; the winner is the higher mean over settings.

  Test-split figures are listed for information only: the choice never looks at them.
  """
  results_dir = pathlib.Path(results_dir)
  rows = []
  for b in BENCHMARK_TITLES:
    for p in POOL_TITLES:
      files = {name: results_path(results_dir, b, p, tag) for name, tag, _ in STAGE1_RECIPES}
      if not all(f.exists() for f in files.values()):
        continue
      row = {"benchmark": b, "pool": p}
      for name, f in files.items():
        r = json.loads(f.read_text())
        best = ((r.get("fit") or {}).get("stage1_best")) or {}
        stage2 = (r.get("fit") or {}).get("stage2") or {}
        row[name] = {"file": f.name, "val_mean_reward": best.get("val_mean_reward"),
                     "val_accuracy": None if best.get("val_accuracy") is None else 100.0 * best["val_accuracy"],
                     "val_mean_cost_usd": best.get("val_mean_cost"), "best_step": best.get("step"),
                     "contrastive_queries": stage2.get("contrastive_queries"),
                     "test_accuracy": r.get("accuracy"), "test_cost_usd": r.get("cost_usd"),
                     "mean_active_roles": r.get("mean_active_roles"), "num_roles": r.get("num_roles")}
      rows.append(row)
  means = {}
  for name, _, _ in STAGE1_RECIPES:
    vals = [row[name]["val_mean_reward"] for row in rows if row[name]["val_mean_reward"] is not None]
    means[name] = sum(vals) / len(vals) if vals else None
  winner = max((n for n in means if means[n] is not None), key=lambda n: means[n], default=None)
  return {"rows": rows, "mean_val_reward": means, "winner": winner,
          "recipes": {name: text for name, _, text in STAGE1_RECIPES}, "provenance": dict(prov)}


def stage1_recipe_markdown(record: Mapping[str, Any]) -> str:
  sim = record["provenance"].get("backend") == "sim"
  lines = ["# HieraMAS stage-1 recipe on validation" + (f" - {sim_title(record)}" if sim else ""), ""]
  if sim:
    lines += ["**Simulated pool (hieramas_jax.sim): not real LLM results.**", ""]
  lines += [f"- **{name}**: {text}" for name, text in record["recipes"].items()]
  lines += ["", "Cell: validation mean system reward of the best stage-1 checkpoint (the selection metric) · "
            "validation accuracy % · best step · stage-2 contrastive queries. Test accuracy % and $ for "
            "information only (never used to choose).", ""]
  names = list(record["recipes"])
  lines += ["| Setting | " + " | ".join(f"{n} (validation)" for n in names) + " | "
            + " | ".join(f"{n} (test)" for n in names) + " |", "|---" * (2 * len(names) + 1) + "|"]
  for row in record["rows"]:
    val = [f"{_fmt(row[n]['val_mean_reward'], '.3f')} · {_fmt(row[n]['val_accuracy'], '.1f')} · step "
           f"{row[n]['best_step']} · {row[n]['contrastive_queries']}" for n in names]
    test = [f"{_fmt(row[n]['test_accuracy'], '.2f')} · ${_fmt(row[n]['test_cost_usd'], '.2f')}" for n in names]
    lines.append(f"| {BENCHMARK_TITLES.get(row['benchmark'])} {POOL_TITLES.get(row['pool'])} | "
                 + " | ".join(val + test) + " |")
  if not record["rows"]:
    lines += ["", "No setting has both recipes' results files yet: run `python experiments/train_hieramas.py "
              "--flagfile=experiments/ablations/total_cost.flags --benchmark=math` beside the main run."]
  means = record["mean_val_reward"]
  lines += ["", "Mean validation reward over the settings: "
            + ", ".join(f"{n} {_fmt(means[n], '.3f')}" for n in names) + "."]
  if record["winner"]:
    lines += ["", f"Higher mean validation reward: **{record['winner']}**. The default stays the published "
              "recipe whatever this says; each recipe's reward charges cost its own way, so compare accuracy "
              "and $ too."]
  lines += provenance_lines(record["provenance"])
  return "\n".join(lines)


def write_stage1_recipe(results_dir: str | pathlib.Path, out_dir: str | pathlib.Path,
                        prov: Mapping[str, Any]) -> list[pathlib.Path]:
  """<out_dir>/stage1_recipe.{json,md}."""
  record = stage1_recipe_record(results_dir, prov)
  return _write_pair(out_dir, "stage1_recipe", record, stage1_recipe_markdown(record))


def hieramas_cells_record(results_dir: str | pathlib.Path, prov: Mapping[str, Any]) -> dict[str, Any]:
  """What the main HieraMAS cells learned: roles switched on, the density and variety of the chosen G*,
  how many stage-2 training queries had any contrast between their graphs (none: the classifier stays at
  its initialisation and K cannot matter), and the LLMs the policy picks."""
  from hieramas_jax.methods.hieramas.config import DEFAULT_K  # pylint: disable=import-outside-toplevel
  results_dir = pathlib.Path(results_dir)
  rows = []
  for b, p in main_settings(results_dir):
    r = json.loads(results_path(results_dir, b, p, "").read_text())
    fit = r.get("fit") or {}
    stage2, best = fit.get("stage2") or {}, fit.get("stage1_best") or {}
    density = r.get("graph_density") or {}
    prefs = r.get("llm_preferences") or {}
    picks = {pos: max(((m, c) for m, c in (prefs.get(pos) or {}).items() if m != "skip"), key=lambda mc: mc[1],
                      default=(None, 0))[0] for pos in ("proposer", "synthesizer")}
    rows.append({"benchmark": b, "pool": p, "accuracy": r.get("accuracy"), "cost_usd": r.get("cost_usd"),
                 "mean_active_roles": r.get("mean_active_roles"), "num_roles": r.get("num_roles"),
                 "mean_density": density.get("mean"), "distinct_graphs": density.get("distinct_graphs"),
                 "k": (r.get("config") or {}).get("k_pool") or DEFAULT_K.get(b),
                 "stage1_best_step": best.get("step"), "contrastive_queries": stage2.get("contrastive_queries"),
                 "stage2_queries": stage2.get("queries"), "label_sources": stage2.get("label_sources"),
                 "most_picked": picks})
    verdicts = learning.cell_verdicts(fit, results_path(results_dir, b, p, "").name)
    rows[-1].update(verdicts=verdicts, classifier=learning.classifier_state(verdicts["stage2"],
                                                                            bool(stage2.get("skipped"))))
  return {"rows": rows, "provenance": dict(prov)}


def hieramas_cells_markdown(record: Mapping[str, Any]) -> str:
  sim = record["provenance"].get("backend") == "sim"
  lines = ["# HieraMAS main cells: what was learned" + (f" - {sim_title(record)}" if sim else ""), ""]
  if sim:
    lines += ["**Simulated pool (hieramas_jax.sim): not real LLM results.**", ""]
  lines += ["Active roles: mean per test query (of the benchmark's roles). Density: of the chosen G* (mean), and "
            "how many distinct G* over the test split. Contrastive: stage-2 training queries whose K candidate "
            "graphs got different rewards (0: the classifier keeps its initialisation, so K changes nothing). "
            "Label contrast: of the contrastive queries, how many differ in whether the query was solved and how "
            "many in the charged cost only (topology can show only in the first). "
            "Classifier: whether it was fit and whether it learned (its verdict below). "
            "Most picked: the policy's most frequent non-skip LLM per position kind.", "",
            "| Setting | Acc % | $ test | Active roles | G* density · distinct | K | Stage-1 best step | "
            "Contrastive (of queries) | Label contrast | Classifier | Most picked (proposer / synthesizer) |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
  for row in record["rows"]:
    picks = row["most_picked"]
    lines.append(f"| {BENCHMARK_TITLES.get(row['benchmark'])} {POOL_TITLES.get(row['pool'])} | "
                 f"{_fmt(row['accuracy'], '.2f')} | ${_fmt(row['cost_usd'], '.2f')} | "
                 f"{_fmt(row['mean_active_roles'], '.2f')}/{row['num_roles']} | "
                 f"{_fmt(row['mean_density'], '.2f')} · {row['distinct_graphs']} | {row['k']} | "
                 f"{row['stage1_best_step']} | {row['contrastive_queries']} ({row['stage2_queries']}) | "
                 f"{learning.label_sources_text(row.get('label_sources'))} | {row['classifier']} | "
                 f"{picks['proposer'] or '-'} / {picks['synthesizer'] or '-'} |")
  lines += verdict_lines({f"{row['benchmark']}|{row['pool']}": row["verdicts"] for row in record["rows"]})
  lines += provenance_lines(record["provenance"])
  return "\n".join(lines)


def write_hieramas_cells(results_dir: str | pathlib.Path, out_dir: str | pathlib.Path,
                         prov: Mapping[str, Any]) -> list[pathlib.Path]:
  """<out_dir>/hieramas_cells.{json,md}."""
  record = hieramas_cells_record(results_dir, prov)
  return _write_pair(out_dir, "hieramas_cells", record, hieramas_cells_markdown(record))
