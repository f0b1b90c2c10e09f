"""results/calibration.md from the calibration record (`experiment/calibration.py`), and writing both files.

Rendering lives with the other reports so the measuring code never imports the report layer.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any, Mapping

from hieramas_jax.benchmarks.data import BENCHMARK_TITLES
from hieramas_jax.experiment.calibration import CALIBRATION_POOLS, lookup_cell
from hieramas_jax.fileio import atomic_write_json, atomic_write_text


def write_calibration(record: Mapping[str, Any], out_dir: str | pathlib.Path) -> list[pathlib.Path]:
  """Writes <out_dir>/calibration.json and calibration.md; returns their paths."""
  out_dir = pathlib.Path(out_dir)
  atomic_write_json(out_dir / "calibration.json", record)
  atomic_write_text(out_dir / "calibration.md", calibration_markdown(record))
  return [out_dir / "calibration.json", out_dir / "calibration.md"]


def _title(b: str) -> str:
  return BENCHMARK_TITLES.get(b, b)


def calibration_markdown(record: Mapping[str, Any]) -> str:
  prov = record["provenance"]
  sim = prov.get("backend") == "sim"
  tol = record["tolerance_pts"]
  profile = record.get("parameters", {}).get("profile", "fitted")
  pool = f"simulated pool (profile {profile})" if sim else f"{prov.get('backend')} endpoint"
  lines = ["# Calibration of the " + pool
           + ": fit, validation, collaboration, cost", ""]
  if sim:
    lines += [f"**{prov['label']}.** Every number below is measured on the simulated pool through the suite's "
              "own methods, MAS runtime, HTTP client and real graders.", ""]
  lines += [f"Items: MATH {record['items_per_benchmark'].get('math', 0)}, MMLU-Redux "
            f"{record['items_per_benchmark'].get('mmlu_redux', 0)} (seeded sample), HumanEval+ "
            f"{record['items_per_benchmark'].get('humaneval_plus', 0)} x sim seeds {record['code_seeds']} "
            f"(independent simulated worlds). Goal: within {tol:g} points. ±SE: binomial standard error.", ""]
  fit = record.get("fit")
  if fit:
    lines += ["## The paper's Table 1 baseline rows (Base, CoT, SC, SC+CoT fitted: they match by construction, "
              "within noise; LLM-Debate measured, never fitted)", "",
              f"Cells outside {tol:g} points: {fit['n_outside']} of {len(fit['cells'])}; largest |diff| "
              f"{fit['max_abs_diff']:.2f}.", "",
              "| Method | Benchmark | Setting | Paper % | Sim % | Diff | ±SE | n | fitted by | within |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for c in fit["cells"]:
      lines.append(f"| {c['method']} | {_title(c['benchmark'])} | {c['setting']} | {c['target']:.2f} | "
                   f"{c['measured']:.2f} | {c['diff']:+.2f} | {c['stderr']:.2f} | {c['n']} | {c['fitted_by']} | "
                   f"{'yes' if c['within'] else '**NO**'} |")
    lines.append("")
  val = record.get("validation")
  if val:
    fg = val["full_graph"]
    lines += ["## Validation: never fitted (the sim's predictions)", "",
              f"**Full-Graph** (one strong agent per role as the reference runs it, every forward "
              f"edge, one round, decision node): sim average **{fg['average']:.2f}%** against the paper's "
              f"{fg['target']:.2f}% ({'within' if fg['within'] else '**outside**'} {tol:g} points); sim CoT average "
              f"{fg['cot_average_measured']:.2f}% (paper {fg['paper_cot_average']:.2f}%): Full-Graph above CoT "
              f"{'holds' if fg['sign_holds'] else '**does not hold**'}; sim SC+CoT average "
              f"{fg.get('sc_cot_average_measured', float('nan')):.2f}% "
              f"(paper {fg.get('paper_sc_cot_average', 91.6):.2f}%): "
              f"Full-Graph above SC+CoT (paper +1.18) "
              f"{'holds' if fg.get('sign_vs_sc_cot_holds') else '**does not hold**'}.", "",
              "| Benchmark | Setting | Full-Graph % | ±SE | n | $/query | calls/query |",
              "|---|---|---|---|---|---|---|"]
    for c in fg["cells"]:
      lines.append(f"| {_title(c['benchmark'])} | {c['setting']} | {c['accuracy']:.2f} | {c['stderr']:.2f} | "
                   f"{c['n']} | {c['cost_per_query']:.5f} | {c['calls_per_query']:.1f} |")
    lines += ["", "Published directions (margin = configuration minus its comparison, points):", "",
              "| Direction | Source | Cells holding | Mean margin | Holds |", "|---|---|---|---|---|"]
    for d in val["directions"]:
      lines.append(f"| {d['statement']} | {d['source']} | {d['cells_holding']} of {len(d['cells'])} | "
                   f"{d['mean_margin']:+.2f} | {'yes' if d['holds'] else '**NO**'} |")
    lines.append("")
  collab = record.get("collaboration")
  if collab:
    lines += ["## Collaboration: what the sim's mechanisms do to multi-agent configurations", "",
              f"{record['collab_items']} items per benchmark (seeded sample; MATH has 500).", ""]
    columns = " | ".join(f"{_title(b)} {s}" for b in ("math", "mmlu_redux") for s in CALIBRATION_POOLS)
    header = f"| Configuration | {columns} |"
    lines += [header, "|---|" + "---|" * 4]
    for key, desc in collab["configs"].items():
      row = []
      for b in ("math", "mmlu_redux"):
        for s in CALIBRATION_POOLS:
          try:
            c = lookup_cell(collab["cells"], key, b, s)
            row.append(f"{c['accuracy']:.1f} (${c['cost_per_query']:.4f})")
          except StopIteration:
            row.append("-")
      lines.append(f"| {desc} | " + " | ".join(row) + " |")
    lines += ["", "Cell: accuracy % ($ per query).", ""]
  cost = record.get("cost_check")
  if cost:
    lines += ["## Cost scale against the paper (test splits, gpt-5-mini everywhere)", "",
              "Reported only: both rows are structures of methods under study (a HieraMAS ablation, Full-Graph), "
              "so no parameter is set or checked from them; token lengths are assumptions except the sourced "
              "ones listed under Parameters (docs/simulator.md, docs/calibration-sources.md).", "",
              "| Row | Benchmark | Structure | Sim $ | Paper $ | Ratio | within ±30% |",
              "|---|---|---|---|---|---|---|"]
    for r in cost["rows"]:
      lines.append(f"| {r['name']} | {_title(r['benchmark'])} | {r['structure']} | {r['measured_usd']:.2f} | "
                   f"{r['target_usd']:.2f} | {r['ratio']:.2f} | {'yes' if r['within'] else '**NO**'} |")
    lines.append("")
  ec = record.get("error_coincidence")
  if ec:
    lines += ["## Error coincidence (in-process, from the sim's own answer identities)", "",
              "| Benchmark | Two models both wrong: same answer | Target "
              "| One model, two samples at T=1 both wrong: same |",
              "|---|---|---|---|"]
    for b, e in ec.items():
      lines.append(f"| {_title(b)} | {e['between_models']:.3f} (n={e['n_between']}) | "
                   f"{e['target_between_models']:.2f} | "
                   f"{e['within_model_T1']:.3f} (n={e['n_within']}) |")
    lines.append("")
  single = record.get("single")
  if single:
    lines += ["## Single models: Base accuracy against the calibration table", "",
              f"Pipeline: {single['pipeline']}. Targets and sources: `hieramas_jax/sim/calibration_targets.py` "
              "(paper_base = HieraMAS Table 1 Base row; public->base = a public figure moved to the Base prompt; "
              "assumption = no published figure, rule in the note).", "",
              f"Cells off by more than {tol:g} points: {single['n_off']} of {len(single['cells'])}; largest |diff|: "
              f"{single['max_abs_diff']:.2f}.", "",
              "| Model | Benchmark | Target % | Measured % | Diff | ±SE | n | Source | Flag |",
              "|---|---|---|---|---|---|---|---|---|"]
    for c in single["cells"]:
      lines.append(f"| {c['model']} | {_title(c['benchmark'])} | {c['target']:.2f} | {c['measured']:.2f} | "
                   f"{c['diff']:+.2f} | {c['stderr']:.2f} | {c['n']} | {c['source']} | "
                   f"{'**OFF**' if c['off'] else 'ok'} |")
    lines += ["", "Notes per cell:", ""]
    lines += [f"- {c['model']} / {c['benchmark']}: {c['note']}" for c in single["cells"]]
    cut = [c for c in single["cells"] if c.get("truncated_share", 0.0) > 0.05]
    if cut:
      lines += ["", "Cut by max_tokens 2048 (the suite's and the reference code's cap): a reasoning model cut "
                "while reasoning returns an empty answer, so these cells miss their target by what the cap "
                "costs, not by a fit error (docs/simulator.md, \"Truncation at the suite's cap\"):", ""]
      lines += [f"- {c['model']} / {c['benchmark']}: {100 * c['truncated_share']:.1f}% of calls cut; "
                f"measured {c['measured']:.2f}% against {c['target']:.2f}%" for c in cut]
    lines.append("")
  lines += aggregation_fit_markdown(record.get("aggregation_fit"))
  lines += ["## Held-out prompt suite", "",
            "Thirty prompts from other public codebases (none of this suite's templates) sent through the official "
            "openai client, each against a bound from published evidence: `sim_heldout_prompts.md` beside this file "
            "(`make calibrate`'s second step, `experiments/sim_heldout_prompts.py --n_items=150`).", ""]
  lines += parameters_markdown(record.get("parameters"))
  lines += constant_sensitivity_markdown(record.get("constant_sensitivity"))
  lines += ["## Provenance", "", "Command:", "", "```", prov["command"], "```", ""]
  lines += ["```json", json.dumps({k: v for k, v in prov.items() if k != "command"}, indent=2), "```", ""]
  return "\n".join(lines)


def _row_line(r: Mapping[str, Any]) -> str:
  m = r["measured"]
  n = f"{r['n']}{' (assumed)' if r['n_assumed'] else ''}"
  return (f"| {r['name']} | {r['use']} | {r['locator']} | {r['target']:+.2f} ± {r['target_interval']:.2f} | {n} | "
          f"{m['fitted']:+.2f} ± {r['measured_interval']:.2f} | {m['low']:+.2f} / {m['high']:+.2f} | "
          f"{'yes' if r['holds'] else '**NO**'} | {'yes' if r['direction_holds'] else '**NO**'} |")


def aggregation_fit_markdown(agg: Mapping[str, Any] | None) -> list[str]:
  """The aggregation fit's table (fit, hold-out, voting checks) and its mechanism-level validation."""
  if not agg:
    return []
  head = ["| Row | Use | Locator | Published effect (pp, 95%) | n | Sim, fitted profile (95%) | Sim low / high "
          "| Holds | Direction holds |", "|---|---|---|---|---|---|---|---|---|"]
  lines = ["## Aggregation mechanism: fit on published rows (mechanism-level, relative effects)", "",
           f"Grid of {agg['region_size']} points within Δχ² ≤ {agg['delta_chi2']:g} of the best "
           f"(χ² {agg['best_chi2']:.2f}) form the confidence region; `low` and `high` are its points of least and "
           f"most mean synthesis gain. {agg['n_items']} synthetic items per population. Effects in points: "
           "aggregate minus best member (synthesis), vote minus one sample (voting).", ""]
  lines += head + [_row_line(r) for r in agg["rows"] if r["use"] in ("fit", "holdout", "check")]
  lines += ["", "### Mechanism-level validation (never fitted: debate, USC, self-revision)", ""]
  lines += head + [_row_line(r) for r in agg["rows"] if r["use"] == "validation"]
  misses = [r for r in agg["rows"] if not r["holds"]]
  if misses:
    lines += ["", "Misses (size = sim minus published): " + "; ".join(
        f"{r['name']} {r['measured']['fitted'] - r['target']:+.1f}" for r in misses) + ". Causes: docs/simulator.md "
        "'Calibration: what the aggregation fit does not reproduce'."]
  profile = agg.get("profile_likelihood")
  if profile:
    profiles = agg.get("profiles", {})
    lines += ["", "### Profile likelihood of each parameter (Δχ² at each grid value, others free)", "",
              "A value is inside the confidence region when its Δχ² ≤ 4; `Spanned` says whether the low and high "
              "profiles between them reach both ends of that range (they are chosen on the synthesis gain, so a "
              "direction that does not move the gain may be left unspanned; the sensitivity run varies only what "
              "they span).", "",
              "| Parameter | Δχ² by value | Best | On the grid's edge | Free (all values within Δχ² 4) "
              "| Inside the region | low / fitted / high | Spanned |", "|---|---|---|---|---|---|---|---|"]
    for name, pl in profile.items():
      got = [profiles[k][name] for k in ("low", "fitted", "high") if name in profiles.get(k, {})]
      inside = [float(v) for v, d in pl["delta_chi2"].items() if d <= agg["delta_chi2"]]
      lo, hi = (min(inside), max(inside)) if inside else (None, None)
      spanned = "" if not got or lo is None else ("yes" if min(got) <= lo and max(got) >= hi else "**no**")
      lines.append(f"| {name} | " + ", ".join(f"{v}: {d:g}" for v, d in pl["delta_chi2"].items())
                   + f" | {pl['best']:g} | {'yes' if pl['edge'] else 'no'} | {'**yes**' if pl['free'] else 'no'} | "
                   + (f"{lo:g} to {hi:g}" if lo is not None else "") + " | "
                   + " / ".join(f"{v:g}" for v in got) + f" | {spanned} |")
  return lines + [""]


def parameters_markdown(table: Mapping[str, Any] | None) -> list[str]:
  if not table:
    return []
  lines = [f"## Every parameter (served profile: {table['profile']})", "",
           "| Parameter | Value | Status | Source | low / fitted / high |", "|---|---|---|---|---|"]
  for r in table["rows"]:
    prof = r.get("profiles")
    span = " / ".join(f"{prof[k]:g}" for k in ("low", "fitted", "high")) if prof else ""
    source = r["source"] + (f"; moves: {r['sensitivity']}" if r.get("sensitivity") else "")
    lines.append(f"| {r['name']} | {json.dumps(r['value'])} | {r['status']} | {source} | {span} |")
  return lines + [""]


def _change(c: Mapping[str, Any]) -> str:
  text = "0" if c["delta"] == 0 else f"{c['delta']:+.2f}"
  return f"({text})" if c["within_noise"] else text


def constant_sensitivity_markdown(sens: Mapping[str, Any] | None) -> list[str]:
  """The table of what each hand-chosen constant moves (`experiment/constant_sensitivity.py`)."""
  if not sens:
    return []
  quantities = sens["quantities"]
  served = sens["served"]
  n = sens["n_items"]
  lines = ["## What each constant moves (computed: a low and a high alternative against the served value)", "",
           f"Each row replaces one constant of the listing above in process (restored after it; the served sim and its "
           f"fingerprint are untouched), builds the sim under it and measures the quantities below against the "
           f"served sim, seed {sens['seed']}, on {n['math']} MATH and {n['mmlu_redux']} MMLU-Redux items (seeded "
           f"samples; `both`: the two pooled), {sens['n_foreign']} MATH items for foreign adoption. Base, CoT and "
           "role agent: the sim's expected accuracy (its own P(correct), exact: no sampling noise); synthesis gain "
           "(gpt-5-mini + deepseek-v3 + gemma-3-27b proposers, gpt-5-mini synthesizer, T 0.7, minus the best "
           "proposer), SC+CoT gain (5-sample vote minus its first sample) and foreign adoption (two proposals from "
           "another question): sampled, compared item by item with the served run; a change in parentheses is "
           f"within {sens['noise_se']:g} paired standard errors (noise). Tokens: mean completion tokens; cut: share of "
           "calls over the 2048-token cap. Cell: change under low / under high, in points (tokens for tokens). "
           f"Theta refitted: Base and CoT held on their targets over all items by `fit_theta`, as `make` would refit. "
           f"Computed in {sens['seconds']:.0f} s (one process).", ""]
  lines += ["| Quantity | " + " | ".join(q["header"] for q in quantities) + " |",
            "|---|" + "---|" * len(quantities),
            "| served level | " + " | ".join(
                f"{served[q['key']]['value']:.2f}" + (f" ± {served[q['key']]['se']:.2f}" if q["sampled"] else "")
                for q in quantities) + " |", ""]
  lines += ["| Constant | Status | Served | Low / high (why) | " + " | ".join(q["header"] for q in quantities) + " |",
            "|---|---|---|---|" + "---|" * len(quantities)]
  for r in sens["rows"]:
    alts = r["low"] + (f" / {r['high']}" if r["high"] else "") + f" ({r['why']})"
    cells = [" / ".join(_change(r["changes"][w][q["key"]]) for w in ("low", "high") if w in r["changes"])
             for q in quantities]
    lines.append(f"| {r['name']} | {r['status']} | {r['served']} | {alts} | " + " | ".join(cells) + " |")
  lines += ["", "Largest change of each quantity outside noise (none listed below half a point, or 1% of the served "
            "level for tokens):", ""]
  for q in quantities:
    floor = 0.01 * served[q["key"]]["value"] if q["unit"] == "tok" else 0.5
    moves = sorted(((abs(c["delta"]), r["name"], w, c["delta"]) for r in sens["rows"]
                    for w, by in r["changes"].items() for c in (by[q["key"]],)
                    if not c["within_noise"] and abs(c["delta"]) >= floor), reverse=True)
    lines.append(f"- {q['header']}: " + ("; ".join(f"{name} ({w}) {d:+.2f}" for _, name, w, d in moves[:3])
                                          if moves else "no constant moves it"))
  lines += ["", "Not perturbed:", ""] + [f"- {r['name']}: {r['why']}" for r in sens["not_perturbed"]]
  return lines + [""]
