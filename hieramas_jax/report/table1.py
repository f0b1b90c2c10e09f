"""Tables 1, 3, 4 and 11 from one runner record (`experiment.runner.run_table`), with their statistics.

Rebuilt from the record alone (`results/table1.json` carries each cell's per-query outcomes), so every
table can be regenerated without rerunning anything:

- Table 1 (main setting): accuracy per method x benchmark x pool in the paper's layout, the paper's
  published figure beside ours, a 95% bootstrap interval over queries per cell (mean +- sd over seeds
  with several seeds), and each method paired against HieraMAS on the same queries;
- Table 3 (generalization setting): the same on the 5 held-out MMLU-Redux subjects;
- Table 4: inference cost (USD over the test split) per method; Table 11: training cost per learned method.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from hieramas_jax.benchmarks.data import BENCHMARK_TITLES
from hieramas_jax.experiment.provenance import sim_title
from hieramas_jax.experiment.record import CellRecord, cell_key
from hieramas_jax.fileio import atomic_write_json, atomic_write_text
from hieramas_jax.report import beyond_learning, learning, paper
from hieramas_jax.report.markdown import provenance_lines
from hieramas_jax.report.paper import POOL_TITLES
from hieramas_jax.report.stats import bootstrap_ci, correct_vector, key_seed, mean_sd, paired_difference

REFERENCE = "hieramas"


def derive(record: Mapping[str, Any]) -> dict[str, Any]:
  """The record plus statistics: per cell `ci95` (accuracy %) and `vs_hieramas` (paired, % points);
  per (row, benchmark, pool, setting) over seeds `groups[...]` with mean, sd and the seeds."""
  out = json.loads(json.dumps(record))
  cells = out["cells"]
  for key, c in cells.items():
    acc = 100.0 * correct_vector(c)
    c["ci95"] = list(bootstrap_ci(acc, seed=key_seed(key)))
    ref = cells.get(CellRecord.from_json(c).sibling_key(REFERENCE))
    if c["label"] != REFERENCE and ref is not None and ref["outcomes"]["ids_sha256"] == c["outcomes"]["ids_sha256"]:
      c["vs_hieramas"] = paired_difference(correct_vector(c), correct_vector(ref), scale=100.0,
                                           seed=key_seed(key + "|paired"))
    if (check := learning.untrained_check(c, key)) is not None:
      c["vs_untrained"] = check
  groups: dict[str, dict[str, Any]] = {}
  for c in cells.values():
    g = groups.setdefault(f"{c['label']}|{c['benchmark']}|{c['pool']}|{c['setting']}",
                          {"label": c["label"], "benchmark": c["benchmark"], "pool": c["pool"],
                           "setting": c["setting"], "seeds": [], "accuracy": [], "cost_usd": [],
                           "training_cost_usd": [], "calls": 0, "truncated_calls": 0})
    g["seeds"].append(c["seed"])
    g["calls"] += int(c.get("n_calls", 0))
    g["truncated_calls"] += int(c.get("truncated_calls", 0))
    g["accuracy"].append(c["accuracy"])
    g["cost_usd"].append(c["cost_usd"])
    if c.get("training"):
      g["training_cost_usd"].append(c["training"]["cost_usd"])
  for g in groups.values():
    g["accuracy_mean"], g["accuracy_sd"] = mean_sd(g["accuracy"])
    g["cost_usd_mean"], g["cost_usd_sd"] = mean_sd(g["cost_usd"])
    if g["training_cost_usd"]:
      g["training_cost_usd_mean"], g["training_cost_usd_sd"] = mean_sd(g["training_cost_usd"])
    # Calls cut by max_tokens (or over the model's context): a real reasoning model at a small budget.
    g["truncation_rate"] = g["truncated_calls"] / g["calls"] if g["calls"] else 0.0
  out["groups"] = groups
  if any(m in out["spec"].get("methods", ()) for m in paper.BEYOND_PAPER_METHODS):
    # Their published figures (data/published_beyond_paper.json) and each cell's learning evidence from its fit
    # summary (report/beyond_learning.py): both rebuilt from the record and the data file, no call.
    out["beyond_paper"] = {
        "published": paper.published_beyond_paper(), "learning_rule": beyond_learning.RULE,
        "learning": {k: ev for k, c in sorted(cells.items()) if (ev := beyond_learning.cell_evidence(c)) is not None}}
  return out


def _fmt(x: float | None, spec: str = ".2f") -> str:
  return "-" if x is None or (isinstance(x, float) and np.isnan(x)) else format(x, spec)


def _rows(derived: Mapping[str, Any]) -> list[str]:
  return sorted({g["label"] for g in derived["groups"].values()}, key=paper.order_key)


def _group(derived, label, benchmark, pool, setting):
  return derived["groups"].get(f"{label}|{benchmark}|{pool}|{setting}")


def _accuracy_text(derived, label, benchmark, pool, setting) -> str:
  g = _group(derived, label, benchmark, pool, setting)
  if g is None:
    return "-"
  if len(g["seeds"]) > 1:
    return f"{g['accuracy_mean']:.2f} ± {_fmt(g['accuracy_sd'])} ({len(g['seeds'])} seeds)"
  c = derived["cells"][cell_key(label, benchmark, pool, setting, g["seeds"][0])]
  lo, hi = c["ci95"]
  return f"{c['accuracy']:.2f} [{lo:.1f}, {hi:.1f}]"


def _header(derived: Mapping[str, Any], title: str) -> list[str]:
  prov = derived["provenance"]
  sim = prov.get("backend") == "sim"
  spec = derived["spec"]
  lines = [f"# {title}" + (f" - {sim_title(prov)}" if sim else f" - {prov.get('backend')}"), ""]
  if sim:
    lines += [f"**{prov['label']}.** Figures are what the suite's methods score against the simulated LLM pool; "
              "they say nothing about the real models. The paper's figures (real models, its own test splits) "
              "stand beside ours for orientation only.", ""]
  limits = [f"{name} {spec[name]}" for name in ("test_limit", "val_limit") if spec.get(name)]
  lines += [f"Setting `{spec['setting']}`; seeds {', '.join(map(str, spec['seeds']))}; training queries per "
            f"benchmark {json.dumps(spec['train_limit'])}" + (f"; {', '.join(limits)}" if limits else "")
            + f"; endpoint `{derived['endpoint']}`" + (" (the suffix fingerprints the simulator's code and data)"
                                                       if sim else "") + ".", ""]
  sandbox = prov.get("sandbox")
  if "humaneval_plus" in spec.get("benchmarks", ()) and isinstance(sandbox, Mapping):
    lines += [f"HumanEval+ programs graded in sandbox mode `{sandbox.get('mode')}` ({sandbox.get('detail')})"
              + (f"; bounds: {sandbox['limits']}" if sandbox.get("limits") else "") + ".", ""]
  return lines


def _provenance(derived: Mapping[str, Any]) -> list[str]:
  return provenance_lines(derived["provenance"])


def _columns(derived) -> list[tuple[str, str]]:
  spec = derived["spec"]
  return [(b, p) for b in spec["benchmarks"] for p in spec["pools"]]


def _paired_section(derived, columns, setting) -> list[str]:
  cells = derived["cells"]
  seeds = derived["spec"]["seeds"]
  rows = [r for r in _rows(derived) if r != REFERENCE]
  if not any(cell_key(REFERENCE, b, p, setting, s) in cells for b, p in columns for s in seeds):
    return []
  lines = ["", f"## Paired comparison with HieraMAS (same queries, seed {seeds[0]})", "",
           "Cell: accuracy difference in points (method - HieraMAS) [95% paired bootstrap interval], McNemar exact "
           "p-value. Negative: HieraMAS is better.", "",
           "| Method | " + " | ".join(f"{BENCHMARK_TITLES.get(b, b)} {POOL_TITLES.get(p, p)}" for b, p in columns)
           + " |", "|---" * (len(columns) + 1) + "|"]
  for r in rows:
    out = []
    for b, p in columns:
      c = cells.get(cell_key(r, b, p, setting, seeds[0]))
      v = (c or {}).get("vs_hieramas")
      out.append("-" if v is None else f"{v['delta']:+.2f} [{v['ci'][0]:+.1f}, {v['ci'][1]:+.1f}], "
                 f"p={v['p_mcnemar']:.3g}")
    lines.append(f"| {paper.method_title(r)} | " + " | ".join(out) + " |")
  return lines


def _gain_over_cot(derived, method: str, benchmark: str, setting: str) -> str:
  """Ours on this run: the method's accuracy minus CoT's, per pool (mean over seeds), in points."""
  out = []
  for p in derived["spec"]["pools"]:
    g, cot = _group(derived, method, benchmark, p, setting), _group(derived, "cot", benchmark, p, setting)
    out.append(f"{POOL_TITLES.get(p, p)} " + ("-" if g is None or cot is None else
                                              f"{g['accuracy_mean'] - cot['accuracy_mean']:+.2f}"))
  return " / ".join(out)


def _published_beyond_section(derived: Mapping[str, Any], setting: str) -> list[str]:
  """Their papers' figures where their benchmarks match ours, with the paper's CoT on the same backbone, and
  our gain over CoT on this run: the published gain and ours side by side (levels are not comparable)."""
  published = (derived.get("beyond_paper") or {}).get("published")
  methods = [m for m in paper.BEYOND_PAPER_METHODS if m in derived["spec"]["methods"]]
  if not published or not methods or setting != "main":
    return []
  marks = "; ".join(f"{k} = {v}" for k, v in published.get("marks", {}).items())
  lines = ["", "## Published figures of the methods beyond the paper (their models, their splits)", "",
           "Each paper's own figure on its benchmark that matches ours, its backbone and locator, and the same "
           "paper's CoT baseline on that backbone; last column: our gain over CoT on this run, same benchmark. "
           "Levels are not comparable (other models, other splits, real LLMs against "
           + ("the simulated pool" if derived["provenance"].get("backend") == "sim" else "this endpoint")
           + "); the gains over CoT are the closest comparison. `-`: not in the paper, or not found or not verified "
           f"(the note says which). Marks: {marks}. Sources per figure: "
           f"`hieramas_jax/data/{paper.PUBLISHED_BEYOND_PAPER_FILE.name}`.", "",
           "| Method | Their benchmark → ours | Backbone | Published · locator | Their CoT | Published gain over CoT "
           "| Ours: gain over CoT | Note |", "|---|---|---|---|---|---|---|---|"]
  for m in methods:
    entry = published.get("methods", {}).get(m, {})
    for b in derived["spec"]["benchmarks"]:
      f = entry.get("figures", {}).get(b) or {}
      ours = f"{published.get('benchmarks', {}).get(b, b)} → {BENCHMARK_TITLES.get(b, b)}"
      if not f.get("benchmark"):
        lines.append(f"| {paper.method_title(m)} | {ours} | - | - (not in the paper) | - | - | "
                     f"{_gain_over_cot(derived, m, b, setting)} | {f.get('note', 'not in the paper')} |")
        continue
      fig, base = f.get("figure"), f.get("baseline")
      mark = f" ({f['mark']})" if f.get("mark") else ""
      pub = "-" if fig is None else f"{fig:.2f}{mark} · {f.get('locator', '-')}"
      cot = "-" if base is None else f"{f.get('baseline_name', 'CoT')} {base:.2f}{mark}"
      gain = "-" if fig is None or base is None else f"{fig - base:+.2f}"
      backbone = (f.get("backbone") or "-") if fig is not None else "-"
      lines.append(f"| {paper.method_title(m)} | {f['benchmark']} → {BENCHMARK_TITLES.get(b, b)} | {backbone} | "
                   f"{pub} | {cot} | {gain} | {_gain_over_cot(derived, m, b, setting)} | {f.get('note', '')} |")
  return lines


def _learning_beyond_section(derived: Mapping[str, Any]) -> list[str]:
  """Per cell of a method beyond the paper: did its fit move its own training objective (verdict and rule)."""
  beyond = derived.get("beyond_paper") or {}
  learning = beyond.get("learning") or {}
  if not learning:
    return []
  lines = ["", "## Learning evidence of the methods beyond the paper", "",
           "What each method's fit did, from what the fit recorded (its summary in this record; no call, no refit). "
           "Verdict: " + beyond.get("learning_rule", beyond_learning.RULE), "",
           "| Method | Setting | Seed | Verdict | Evidence |", "|---|---|---|---|---|"]
  cells = derived["cells"]
  for key in sorted(learning, key=lambda k: (paper.order_key(cells[k]["label"]), cells[k]["benchmark"],
                                             cells[k]["pool"], cells[k]["seed"])):
    c, v = cells[key], learning[key]
    lines.append(f"| {paper.method_title(c['label'])} | {BENCHMARK_TITLES.get(c['benchmark'], c['benchmark'])} "
                 f"{POOL_TITLES.get(c['pool'], c['pool'])} | {c['seed']} | {beyond_learning.short_verdict(v)} | "
                 f"{beyond_learning.evidence_text(c['method'], v)} |")
  return lines


def _untrained_section(derived: Mapping[str, Any], columns, setting) -> list[str]:
  """Per learned row and seed: did training beat the same method untrained, on the same test queries."""
  cells = derived["cells"]
  rows = [(r, s) for r in _rows(derived) for s in derived["spec"]["seeds"]
          if any("vs_untrained" in cells.get(cell_key(r, b, p, setting, s), {}) for b, p in columns)]
  if not rows:
    return []
  several = len(derived["spec"]["seeds"]) > 1
  lines = ["", "## Did training beat the untrained method? (same test queries)", "",
           "Cell: verdict, accuracy difference in points (trained - untrained) [95% paired bootstrap interval], and "
           "the untrained method's accuracy. Verdict: " + learning.UNTRAINED_RULE
           + " HieraMAS's own per-stage verdicts are in `hieramas_cells.md`.", "",
           "| Method | " + " | ".join(f"{BENCHMARK_TITLES.get(b, b)} {POOL_TITLES.get(p, p)}" for b, p in columns)
           + " | Learned in |", "|---" * (len(columns) + 2) + "|"]
  for r, s in rows:
    checks = [cells.get(cell_key(r, b, p, setting, s), {}).get("vs_untrained") for b, p in columns]
    judged = [v for v in checks if v and v.get("verdict")]
    count = f"{sum(v['verdict'] == learning.LEARNED for v in judged)} of {len(judged)}"
    lines.append(f"| {paper.method_title(r)}{f' (seed {s})' if several else ''} | "
                 + " | ".join(learning.untrained_text(v) for v in checks) + f" | {count} |")
  return lines


def table1_markdown(derived: Mapping[str, Any], suffix: str = "") -> str:
  """Table 1 in the paper's layout (rows: methods; columns: benchmark x backbone; Avg.). `suffix`: the file-name
  suffix the tables are written with (`write_tables`), which the pointer to the cost tables names."""
  columns = _columns(derived)
  setting = derived["spec"]["setting"]
  beyond = [m for m in paper.BEYOND_PAPER_METHODS if m in derived["spec"]["methods"]]
  lines = _header(derived, "Table 1" + (", extended with methods published after the paper" if beyond else ""))
  if beyond:
    lines += [f"Extended (issue 32): {', '.join(paper.method_title(m) for m in beyond)} run on the same runner, "
              "splits, pools, client and graders as the paper's rows, each as its public code runs it "
              "(`docs/methods.md` names every deviation). Their own papers report other models and splits, so "
              "their **paper** cells read `-`; their published figures stand in the table below this one, each "
              "beside its paper's CoT baseline.", ""]
  lines += ["Cell: **ours** = accuracy % [95% bootstrap interval over queries] (mean ± sd over seeds when several) · "
            "**paper** = the published figure (`-`: not published, or not in the text available to us). "
            "Components as in the paper: M(ulti-agent), T(opology), R(oles and LLMs), N(ode configuration). "
            # Parenthesised: the legend above holds on every backend, only this sentence depends on it.
            + ("† = a row the simulated pool was fitted on (it matches the paper by construction); every other "
               "row is the simulator's prediction." if derived["provenance"].get("backend") == "sim" else
               f"Every row was measured on `{derived['endpoint']}`."), ""]
  header = "| Method | Comp. | " + " | ".join(f"{BENCHMARK_TITLES.get(b, b)} {POOL_TITLES.get(p, p)}"
                                                for b, p in columns) + " | Avg. |"
  lines += [header, "|---" * (len(columns) + 3) + "|"]
  full = [(b, p) for b in ("humaneval_plus", "math", "mmlu_redux") for p in ("gpt-5-mini", "qwen3-80b")]
  for r in _rows(derived):
    method = r.partition("-")[0]
    fitted = "†" if method in paper.FITTED_ON_SIM and derived["provenance"].get("backend") == "sim" and r == method \
        else ""
    row = [paper.method_title(r) + fitted, paper.COMPONENTS.get(method, "")]
    accs = []
    for b, p in columns:
      g = _group(derived, r, b, p, setting)
      published = paper.TABLE1.get(r, {}).get((b, p)) if setting == "main" else None
      row.append(f"**{_accuracy_text(derived, r, b, p, setting)}** · {_fmt(published)}")
      if g is not None:
        accs.append(g["accuracy_mean"])
    avg = sum(accs) / len(accs) if len(accs) == len(columns) else None
    published_avg = paper.TABLE1_AVERAGE.get(r) if setting == "main" and columns == full else None
    row.append(f"**{_fmt(avg)}** · {_fmt(published_avg)}")
    lines.append("| " + " | ".join(row) + " |")
  lines += _published_beyond_section(derived, setting)
  lines += _paired_section(derived, columns, setting)
  lines += _untrained_section(derived, columns, setting)
  lines += _learning_beyond_section(derived)
  lines += ["", f"Inference and training costs of the same runs: `table4{suffix}.md` and `table11{suffix}.md`."]
  lines += _provenance(derived)
  return "\n".join(lines)


def table3_markdown(derived: Mapping[str, Any]) -> str:
  """Table 3: the generalization setting (trained on 25 MMLU-Redux subjects, tested on the 5 held out)."""
  columns = _columns(derived)
  lines = _header(derived, "Table 3 (generalization to 5 held-out MMLU-Redux subjects)")
  lines += ["Every method trains (if it learns) on the 25 other subjects' training split and is tested on all "
            "questions of the 5 held-out subjects (`test_ood`). Cell: accuracy % [95% bootstrap interval] "
            "(mean ± sd over seeds when several). The paper's Table 3 figures are not in the text available to "
            "us.", "",
            "| Method | " + " | ".join(POOL_TITLES.get(p, p) for _, p in columns) + " | Avg. |",
            "|---" * (len(columns) + 2) + "|"]
  for r in _rows(derived):
    accs = [g["accuracy_mean"] for b, p in columns if (g := _group(derived, r, b, p, "generalization"))]
    avg = sum(accs) / len(accs) if len(accs) == len(columns) else None
    lines.append(f"| {paper.method_title(r)} | " + " | ".join(
        _accuracy_text(derived, r, b, p, "generalization") for b, p in columns) + f" | {_fmt(avg)} |")
  lines += _paired_section(derived, columns, "generalization")
  lines += _untrained_section(derived, columns, "generalization")
  lines += _provenance(derived)
  return "\n".join(lines)


def _spend_lines(derived: Mapping[str, Any]) -> list[str]:
  """The run root's spend ledger (llm/ledger.py) per backend, as the run left it: billed, reserved and estimated
  unbilled apart. Why in the cost tables: their cells sum what the answers cost, while the ledger also holds what
  was paid and not used (retries, calls of a run that was cut and resumed, other seeds) and what a provider may
  still bill; a reader deciding a budget needs both. A results file written before the ledger existed has none."""
  seeds_of: dict[str, list[str]] = {}  # one ledger per run root: the seeds' backends usually show the same one
  for seed, backend in sorted((derived.get("backends") or {}).items(), key=lambda kv: int(kv[0])):
    if isinstance(backend, Mapping) and backend.get("spend"):
      seeds_of.setdefault(json.dumps(backend["spend"], sort_keys=True), []).append(seed)
  lines = []
  for spend, seeds in seeds_of.items():
    s = json.loads(spend)
    cap = "" if s.get("max_usd") is None else f" of a --max_usd cap of ${s['max_usd']:.4f}"
    lines.append(f"Spend ledger of the run root (seed{'s' * (len(seeds) > 1)} {', '.join(seeds)}; every cell, seed "
                 f"and rerun in that root): ${s['total_usd']:.4f}{cap} = billed ${s['spent_usd']:.4f} + reserved "
                 f"${s['reserved_usd']:.4f} (in flight when the run ended) + estimated unbilled "
                 f"${s['estimated_unbilled_usd']:.4f} (sent and never answered, at its upper estimate); "
                 f"{s['paid_calls']} paid calls of {s['attempts']} attempts.")
  if lines and derived["provenance"].get("backend") == "sim":
    lines.append("On the simulated pool these are the frozen price table's dollars: no money was spent.")
  return lines + [""] * bool(lines)


def _cost_table(derived, title: str, intro: str, rows: Sequence[str], value: Callable, published: Mapping, *,
                truncation: bool = False) -> str:
  columns = _columns(derived)
  setting = derived["spec"]["setting"]
  lines = _header(derived, title) + _spend_lines(derived) + [intro, "",
                                     "| Method | " + " | ".join(f"{BENCHMARK_TITLES.get(b, b)} {POOL_TITLES.get(p, p)}"
                                                             for b, p in columns) + " |",
                                     "|---" * (len(columns) + 1) + "|"]
  for r in rows:
    out = []
    for b, p in columns:
      g = _group(derived, r, b, p, setting)
      v = value(g) if g else None
      pub = published.get(r, {}).get(b) if p == "gpt-5-mini" and setting == "main" else None
      trunc = g.get("truncation_rate", 0.0) if g and truncation else 0.0
      out.append(("-" if v is None else f"${v:.4f}") + (f" · paper ${pub:.2f}" if pub is not None else "")
                 + (f" · {100 * trunc:.1f}% cut" if trunc else ""))
    lines.append(f"| {paper.method_title(r)} | " + " | ".join(out) + " |")
  lines += _provenance(derived)
  return "\n".join(lines)


def table4_markdown(derived: Mapping[str, Any]) -> str:
  """Table 4: inference cost (USD over the test split) per method."""
  published = {**paper.TABLE4, "full_graph": paper.FULL_GRAPH_COST}
  return _cost_table(derived, "Table 4 (inference cost)",
                     "Cell: USD spent answering the whole test split (every call of every query, frozen price table; "
                     "mean over seeds when several) · the paper's figure where published (GPT-5-Mini setting) · "
                     "where any, the share of calls cut by max_tokens or the model's context (`finish_reason`).",
                     _rows(derived), lambda g: g["cost_usd_mean"], published, truncation=True)


def table11_markdown(derived: Mapping[str, Any]) -> str:
  """Table 11: training cost (USD of every call made while fitting) per learned method."""
  rows = [r for r in _rows(derived) if any(g["label"] == r and g["training_cost_usd"]
                                           for g in derived["groups"].values())]
  return _cost_table(derived, "Table 11 (training cost)",
                     "Cell: USD of every LLM call made while fitting (a call replayed from the response cache counts "
                     "at the pool's current prices) · the paper's figure where published. What each includes: HieraMAS (both "
                     "recipes): stage-1 rollouts, validation runs and stage-2 data collection (the classifier fit and "
                     "the sentence encoder make no LLM call); GDesigner and MASRouter: their training rollouts; AFlow: "
                     "the candidate workflows' evaluations only: this suite's AFlow edits workflows with operators "
                     "instead of an optimizer LLM writing code, so the optimizer LLM's cost, part of the paper's "
                     "figure, is left out; the best static configuration: its search's evaluations. Inference-only "
                     "variants that load another run's fit are left out.",
                     rows, lambda g: g.get("training_cost_usd_mean"),
                     paper.TABLE11)


def _cost_json(derived, key: str) -> dict[str, Any]:
  return {"what": key, "groups": {k: {f: g.get(f) for f in ("label", "benchmark", "pool", "setting", "seeds",
                                                               key + "_mean", key + "_sd")}
                                  for k, g in derived["groups"].items()},
          "provenance": derived["provenance"]}


def write_tables(record: Mapping[str, Any], out_dir: str | pathlib.Path, *, suffix: str = "") -> list[pathlib.Path]:
  """Writes the setting's tables (main: table1, table4, table11; generalization: table3), .json and .md.

  `suffix` (e.g. "_limit3") keeps quick runs from overwriting the full tables. Returns the paths.
  """
  out_dir = pathlib.Path(out_dir)
  derived = derive(record)
  if record["spec"]["setting"] == "generalization":
    files = {f"table3{suffix}": (derived, table3_markdown(derived))}
  else:
    files = {f"table1{suffix}": (derived, table1_markdown(derived, suffix)),
             f"table4{suffix}": (_cost_json(derived, "cost_usd"), table4_markdown(derived)),
             f"table11{suffix}": (_cost_json(derived, "training_cost_usd"), table11_markdown(derived))}
  written = []
  for stem, (data, md) in files.items():
    atomic_write_json(out_dir / f"{stem}.json", data)
    atomic_write_text(out_dir / f"{stem}.md", md)
    written += [out_dir / f"{stem}.json", out_dir / f"{stem}.md"]
  return written
