"""A sweep's table and plot (accuracy and cost against the swept flag) from its points' results files.

Each grid point of a sweep (`launch/sweep.py`) is an ordinary HieraMAS run whose results file
(`results/hieramas_<benchmark>_<pool>_<tag>.json`, `report/hieramas.py`) carries accuracy, cost, mean
system reward and provenance; the sweep's record lines them up by the swept values. Figures made on
the simulated pool say so in their title.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any, Mapping, Sequence

from hieramas_jax.experiment.provenance import SIMULATED_LABEL, sim_title
from hieramas_jax.report import learning
from hieramas_jax.report.stats import error_bars, wilson_interval



def sweep_record(spec: Mapping[str, Any], points: Sequence[Mapping[str, Any]], prov: Mapping[str, Any]
                 ) -> dict[str, Any]:
  """The sweep's rows: each point's values and its results (None when the point has no results yet).

  Args:
    spec: the sweep spec (name, program, flags, grid).
    points: per grid point {"values": {...}, "results_file": path, "results": the file's content or None}.
    prov: provenance of the table itself (the sweep command).
  """
  rows = []
  backends = set()
  for p in points:
    r = p.get("results")
    row = {"values": dict(p["values"]), "results_file": p["results_file"], "done": r is not None}
    if r is not None:
      backends.add((r.get("provenance") or {}).get("backend"))
      row.update({k: r.get(k) for k in ("accuracy", "n", "cost_usd", "mean_cost_usd", "mean_system_reward",
                                        "mean_active_roles")})
      row["command"] = (r.get("provenance") or {}).get("command")
      row["verdicts"] = learning.cell_verdicts(r.get("fit"), pathlib.Path(p["results_file"]).name)
    rows.append(row)
  outcomes = [(p.get("results") or {}).get("outcomes") for p in points]
  learning.mark_against_first(rows, outcomes, spec["name"], [r["values"].get("seed") for r in rows])
  backend = ",".join(sorted(b for b in backends if b)) or None
  return {"name": spec["name"], "description": spec.get("description", ""), "program": spec["program"],
          "flags": dict(spec.get("flags", {})), "grid": dict(spec["grid"]), "rows": rows, "backend": backend,
          "label": SIMULATED_LABEL if backend == "sim" else None, "seed_groups": learning.seed_groups(rows, outcomes),
          "provenance": dict(prov)}


def sweep_markdown(record: Mapping[str, Any]) -> str:
  names = sorted(record["grid"])
  sim = record.get("backend") == "sim"
  lines = [f"# Sweep {record['name']}" + (f" - {sim_title(record)}" if sim else ""), ""]
  if sim:
    lines += [f"**{record['label']}.**", ""]
  if record.get("description"):
    lines += [record["description"], ""]
  lines += [f"Program `{record['program']}`; fixed flags `{json.dumps(record['flags'], sort_keys=True)}`.", "",
            "Accuracy: (vs comparison ...) is the paired difference from the first point of the same seed on the "
            "same test queries "
            "(95% interval; *inside noise* when it holds 0). Learned: the learning verdicts (report/learning.py).",
            "",
            "| " + " | ".join(names) + " | accuracy % | $/query | mean reward | active roles | n | learned | results |",
            "|---" * (len(names) + 7) + "|"]

  def fmt(v, spec):
    return "-" if v is None else format(v, spec)

  for row in record["rows"]:
    lines.append("| " + " | ".join(str(row["values"][n]) for n in names) + " | "
                 + (" | ".join([fmt(row.get("accuracy"), ".2f") + learning.noise_text(row.get("vs_first")),
                                fmt(row.get("mean_cost_usd"), ".5f"),
                                fmt(row.get("mean_system_reward"), ".3f"), fmt(row.get("mean_active_roles"), ".2f"),
                                fmt(row.get("n"), "d"), learning.short_verdicts(row["verdicts"])])
                    if row["done"] else "not run yet | - | - | - | - | -")
                 + f" | `{row['results_file']}` |")
  lines += learning.seed_group_lines(record.get("seed_groups") or [])
  prov = record["provenance"]
  lines += ["", "## Provenance", "", "Command (the table; each point's own command is in its results file):", "",
            "```", prov.get("command", ""), "```", "", "```json",
            json.dumps({k: v for k, v in prov.items() if k != "command"}, indent=2), "```", ""]
  return "\n".join(lines)


# The paper's published figures per swept value (real LLMs; accuracy %, total test-split cost in USD or None):
# Table 7 (K) and Table 6 (W), MMLU-Redux with the GPT-5-Mini pool (report/ablations.py PAPER).
PAPER_SWEEPS = {("k_pool", "mmlu_redux", "gpt-5-mini"): ("table7", {"k50": 50, "": 200, "k500": 500}),
                ("num_proposers", "mmlu_redux", "gpt-5-mini"): ("table6", {"": 2, "w6": 6, "w8": 8})}


def paper_points(axis: str, flags: Mapping[str, Any]) -> dict[Any, tuple[float, float | None]]:
  """Swept value -> the paper's (accuracy %, total cost USD or None), where the paper reports the sweep."""
  from hieramas_jax.report.ablations import PAPER  # pylint: disable=import-outside-toplevel
  key = (axis, flags.get("benchmark"), flags.get("pool"))
  if key not in PAPER_SWEEPS:
    return {}
  table, values = PAPER_SWEEPS[key]
  published = PAPER[table].get(key[1:], {})
  return {v: published[tag] for tag, v in values.items() if tag in published}


def sweep_figure(record: Mapping[str, Any]):
  """Accuracy (95% Wilson interval over the test queries) and cost per query against the swept flag (one
  line per value of any other grid flag), the paper's published values beside them where it has them."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  names = sorted(record["grid"])
  axis = names[0]
  others = names[1:]
  fig, (ax_acc, ax_cost) = plt.subplots(1, 2, figsize=(9, 3.4))
  series: dict[tuple, list] = {}
  for row in record["rows"]:
    if row["done"]:
      series.setdefault(tuple(row["values"][n] for n in others), []).append(row)
  for key, rows in sorted(series.items(), key=lambda kv: str(kv[0])):
    rows = sorted(rows, key=lambda r: r["values"][axis])
    xs = [r["values"][axis] for r in rows]
    label = ", ".join(f"{n}={v}" for n, v in zip(others, key)) or "this suite"
    acc = [r["accuracy"] for r in rows]
    ci = [wilson_interval(round(r["accuracy"] * r["n"] / 100), r["n"]) if r.get("n") else (a, a)
          for r, a in zip(rows, acc)]
    ax_acc.errorbar(xs, acc, yerr=error_bars(acc, ci), fmt="o-", capsize=3, label=f"{label} (95% interval)")
    ax_cost.plot(xs, [r["mean_cost_usd"] for r in rows], "o-", label=label)
  paper = paper_points(axis, record.get("flags") or {})
  if paper:
    xs = sorted(paper)
    ax_acc.plot(xs, [paper[x][0] for x in xs], "s--", color="k", mfc="none", label="paper (real LLMs)")
    n = next((r.get("n") for r in record["rows"] if r.get("n")), None)
    costs = [(x, paper[x][1] / n) for x in xs if paper[x][1] is not None and n]
    if costs:
      ax_cost.plot([x for x, _ in costs], [c for _, c in costs], "s--", color="k", mfc="none",
                   label="paper (total / n)")
  for ax in (ax_acc, ax_cost):
    ax.set_xticks(sorted(record["grid"][axis]))
  ax_acc.set(xlabel=axis, ylabel="accuracy % (95% interval)", title="accuracy")
  ax_cost.set(xlabel=axis, ylabel="USD per query", title="inference cost")
  ax_cost.set_ylim(bottom=0)  # from zero: a 0.4% difference drawn full height read as a large one
  if series or paper:
    ax_acc.legend(fontsize=7)
    ax_cost.legend(fontsize=7)
  sim = record.get("backend") == "sim"
  fig.suptitle(f"Sweep {record['name']}" + (f" ({sim_title(record)})" if sim else ""))
  if not series:
    for ax in (ax_acc, ax_cost):
      ax.text(0.5, 0.5, "no finished point yet", ha="center", va="center", transform=ax.transAxes)
  fig.tight_layout()
  return fig


def write_figure(fig, path: str | pathlib.Path) -> None:
  """Saves a matplotlib figure as PNG atomically and closes it."""
  from hieramas_jax.fileio import atomic_write_bytes  # pylint: disable=import-outside-toplevel
  import io  # pylint: disable=import-outside-toplevel
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  buf = io.BytesIO()
  fig.savefig(buf, format="png", dpi=110)
  plt.close(fig)
  atomic_write_bytes(path, buf.getvalue())


def write_sweep(record: Mapping[str, Any], out_dir: str | pathlib.Path) -> list[pathlib.Path]:
  """results/sweep_<name>.{json,md,png}."""
  from hieramas_jax.fileio import atomic_write_json, atomic_write_text  # pylint: disable=C0415
  out_dir = pathlib.Path(out_dir)
  stem = out_dir / f"sweep_{record['name']}"
  # Everything is made before anything is written: a figure that fails leaves no table beside a stale plot.
  markdown, fig = sweep_markdown(record), sweep_figure(record)
  atomic_write_json(stem.with_suffix(".json"), record)
  atomic_write_text(stem.with_suffix(".md"), markdown)
  write_figure(fig, stem.with_suffix(".png"))
  return [stem.with_suffix(s) for s in (".json", ".md", ".png")]
