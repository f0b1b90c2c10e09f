"""The sample browser: every test query of every cell, readable offline (`results/report/samples/`).

`samples/index.html` lists the cells (Tables 1 and 3 and their limited runs' `table1_limit3*.json`, the
HieraMAS results files, and with `run_root` every cell directory under it), those whose run directory is
on this machine; the others are counted, not listed. Choosing a cell loads its query list
`samples/cells/<id>.js` (a `<script>`, so the page works from file:// with no server): per query its
grade, cost, extracted answer and question, filtered by correctness, searched by text (id, question,
extracted answer), sorted by id or cost. Opening a query loads the chunk of `CHUNK` queries that holds
its detail (`samples/cells/<id>/<k>.js`): per method (two side by side) the gold answer, the extracted
answer, the grade, cost, tokens, the MAS configuration (LLM per position, active roles, the graph) where
the method has one, and every call: its position, model, prompt messages and response. So the page loads
only what is looked at (a full-table cell's calls are tens of MB). The address holds the choice
(`#setting=..&benchmark=..&pool=..&a=..&b=..&q=<query id>`): a deep link to a query.

Run directories written before traces kept prompts (or the gold answer) say "not recorded"; the gold
answer then comes from the benchmark's data file. Each chunk stores each distinct string once (prompts
repeat across calls and items).
"""

from __future__ import annotations

import json
import pathlib
from typing import Any, Mapping

from hieramas_jax.experiment.evaluate import read_traces
from hieramas_jax.experiment.rundir import from_repo, repo_relative, safe_name
from hieramas_jax.report import paper
from hieramas_jax.report.page import load_json

_FIELDS = ("n_calls", "prompt_tokens", "completion_tokens", "cached_calls")
# Queries per detail chunk: a chunk of a full-table HieraMAS cell (every call's prompt and response) is
# about 3 MB, loaded when one of its queries is opened.
CHUNK = 25


def table_files(results: pathlib.Path, names=("table1", "table3")) -> list[pathlib.Path]:
  """table1.json and table3.json first, then limited runs' (table1_limit3_train8.json: a quick look)."""
  files = [results / f"{n}.json" for n in names]
  files += sorted(f for n in names for f in results.glob(f"{n}_*.json"))
  return [f for f in files if f.exists()]


def _run_root_cells(run_root: pathlib.Path) -> list[dict[str, Any]]:
  """Every cell directory under a run root (its config.json names the cell), finished or not."""
  from hieramas_jax.experiment.record import cell_key  # pylint: disable=import-outside-toplevel
  cells = []
  for items in sorted(run_root.rglob("items.jsonl")):
    config = load_json(items.parent / "config.json") or {}
    c = config.get("cell") if isinstance(config, dict) else None
    if not isinstance(c, dict) or not c.get("method"):
      continue
    label = c["method"] + (f"-{c['tag']}" if c.get("tag") else "")
    setting, seed = c.get("setting", "main"), c.get("seed", 0)
    cells.append({"key": cell_key(label, c["benchmark"], c["pool"], setting, seed), "table": "run root",
                  "method": label, "benchmark": c["benchmark"], "pool": c["pool"], "setting": setting, "seed": seed,
                  "run_dir": repo_relative(items.parent)})
  return cells


def sample_cells(results: pathlib.Path, run_root: pathlib.Path | None = None) -> list[dict[str, Any]]:
  """Every cell the browser may show: Table 1 and 3 cells (limited runs' too), HieraMAS results files of
  other run dirs, and every cell directory under `run_root`; each run directory once."""
  cells, seen = [], set()
  for f in table_files(results):
    record = load_json(f) or {}
    for key, c in sorted((record.get("cells") or {}).items()):
      if c.get("run_dir") and c["run_dir"] not in seen:
        seen.add(c["run_dir"])
        cells.append({"key": key, "table": f.stem, "method": c.get("label") or c.get("method"),
                      "benchmark": c["benchmark"], "pool": c["pool"], "setting": c.get("setting", "main"),
                      "seed": c.get("seed", 0), "run_dir": c["run_dir"]})
  for f in sorted(results.glob("hieramas_*.json")):
    r = load_json(f)
    if isinstance(r, dict) and r.get("run_dir") and r.get("benchmark") and r["run_dir"] not in seen:
      seen.add(r["run_dir"])
      label = r.get("method", "hieramas") + (f"-{r['tag']}" if r.get("tag") else "")
      cells.append({"key": f.stem, "table": f.name, "method": label, "benchmark": r["benchmark"],
                    "pool": r["pool"], "setting": r.get("setting", "main"), "seed": 0, "run_dir": r["run_dir"]})
  for c in _run_root_cells(run_root) if run_root is not None else []:
    if c["run_dir"] not in seen:
      seen.add(c["run_dir"])
      cells.append(c)
  for i, c in enumerate(cells):
    c["id"] = f"{i:03d}-" + safe_name(c["key"], "_")[:80]
  return cells


class _Strings:
  """Distinct strings of one data file, each stored once and named by its index."""

  def __init__(self):
    self.index: dict[str, int] = {}
    self.values: list[str] = []

  def __call__(self, s: str | None) -> int | None:
    if s is None:
      return None
    if s not in self.index:
      self.index[s] = len(self.values)
      self.values.append(s)
    return self.index[s]


def _mas(extra: Mapping[str, Any]) -> dict[str, Any] | None:
  """The MAS configuration a query ran (roles, LLM per position, active roles, edges), if any."""
  config = extra.get("config")
  if not isinstance(config, Mapping) or "nodes" not in config:
    return None
  active = extra.get("active_roles")
  nodes = [{"role": n.get("role"), "proposers": n.get("proposers", []), "synthesizer": n.get("synthesizer"),
            "active": active is None or j in active} for j, n in enumerate(config["nodes"])]
  return {"nodes": nodes, "edges": config.get("edges", []), "decision_model": config.get("decision_model"),
          "graph_kind": extra.get("graph_kind"), "graph_density": extra.get("graph_density")}


def cell_data(cell: Mapping[str, Any]) -> dict[str, Any]:
  """One cell's queries for the browser (strings interned); missing run dirs give no queries."""
  from hieramas_jax.benchmarks import data as data_lib  # pylint: disable=import-outside-toplevel
  run_dir = from_repo(cell["run_dir"])
  strings = _Strings()
  items_path = run_dir / "items.jsonl"
  if not items_path.exists():
    return {"strings": [], "items": [], "missing": f"{cell['run_dir']}/items.jsonl is not on this machine"}
  traces = read_traces(run_dir)
  try:
    gold = data_lib.items_by_id(cell["benchmark"])
  except Exception:  # pylint: disable=broad-except  # the data file may be absent: the traces may hold it
    gold = {}
  items = []
  for line in items_path.read_text(encoding="utf-8").splitlines():
    try:
      rec = json.loads(line)
    except json.JSONDecodeError:
      continue
    trace = traces.get(rec["item_id"])
    source = gold.get(rec["item_id"])
    target = (trace or {}).get("target", source.answer if source else None)
    calls = []
    for c in (trace or {}).get("calls", []):
      msgs = c.get("messages")
      calls.append({"position": c.get("position"), "role": c.get("role"), "model": c.get("model"),
                    "node": c.get("node"), "text": strings(c.get("text")), "cost": c.get("cost_usd"),
                    "pt": c.get("prompt_tokens"), "ct": c.get("completion_tokens"), "cached": c.get("cached"),
                    "finish": c.get("finish_reason"),
                    "messages": None if msgs is None else [[m["role"], strings(m["content"])] for m in msgs]})
    summary = rec.get("trace") or {}
    items.append({"id": rec["item_id"], "correct": rec["correct"], "extracted": rec.get("extracted"),
                  "detail": rec.get("detail"), "target": strings(target), "cost": rec.get("cost_usd"),
                  **{k: rec.get(k) for k in _FIELDS},
                  "question": strings(source.question) if source else None,
                  "final": strings((trace or {}).get("final_text")), "traced": trace is not None, "calls": calls,
                  "mas": _mas((trace or {}).get("extra") or summary)})
  return {"strings": strings.values, "items": items}


def split_cell(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
  """A cell's data as its query list (what the list, filters, search and sort need) and its detail
  chunks of `CHUNK` queries, each with its own strings (what opening a query needs)."""
  strings = data["strings"]
  rows, chunks = [], []
  for k in range(0, len(data["items"]), CHUNK):
    local = _Strings()

    def move(i, local=local):
      return local(strings[i]) if i is not None else None
    details = {}
    for it in data["items"][k:k + CHUNK]:
      calls = [{**c, "text": move(c["text"]),
                "messages": None if c["messages"] is None else [[r, move(i)] for r, i in c["messages"]]}
               for c in it["calls"]]
      details[it["id"]] = {**it, "target": move(it["target"]), "question": move(it["question"]),
                           "final": move(it["final"]), "calls": calls}
      rows.append({"id": it["id"], "correct": it["correct"], "cost": it["cost"], "extracted": it["extracted"],
                   "question": strings[it["question"]] if it["question"] is not None else None,
                   "n_calls": it.get("n_calls"), "chunk": k // CHUNK})
    chunks.append({"strings": local.values, "items": details})
  return {"items": rows, **({"missing": data["missing"]} if data.get("missing") else {})}, chunks


def write_samples(results: str | pathlib.Path, out_dir: str | pathlib.Path,
                  run_root: str | pathlib.Path | None = None) -> tuple[pathlib.Path, int]:
  """samples/index.html, per cell its query list and detail chunks; returns the page and how many cells
  it lists (those with a run directory on this machine)."""
  from hieramas_jax.fileio import atomic_write_text  # pylint: disable=import-outside-toplevel
  results, out_dir = pathlib.Path(results), pathlib.Path(out_dir)
  cells = sample_cells(results, pathlib.Path(run_root) if run_root is not None else None)
  manifest, absent, written = [], [], set()
  for cell in cells:
    data = cell_data(cell)
    if data.get("missing"):  # not on this machine: counted, not listed as an empty "(0/0)" cell
      absent.append(cell["key"])
      continue
    listing, chunks = split_cell(data)
    listing_file = out_dir / "cells" / f"{cell['id']}.js"
    atomic_write_text(listing_file, f"window.SAMPLES_LOADED({json.dumps(cell['id'])}, {_js(listing)});\n")
    written.add(listing_file)
    for k, chunk in enumerate(chunks):
      chunk_file = out_dir / "cells" / cell["id"] / f"{k}.js"
      atomic_write_text(chunk_file, f"window.SAMPLES_CHUNK({json.dumps(cell['id'])}, {k}, {_js(chunk)});\n")
      written.add(chunk_file)
    manifest.append({**{k: cell[k] for k in ("id", "key", "table", "method", "benchmark", "pool", "setting",
                                                "seed", "run_dir")},
                     "title": paper.method_title(cell["method"]), "n": len(data["items"]),
                     "n_correct": sum(it["correct"] for it in data["items"])})
  path = out_dir / "index.html"
  atomic_write_text(path, render_index(manifest, absent))
  _remove_stale(out_dir / "cells", written)
  return path, len(manifest)


def _remove_stale(cells_dir: pathlib.Path, written: set[pathlib.Path]) -> None:
  """Deletes the cell files an earlier report wrote and this one did not (cells since rerun under another
  id, or gone): no index links them, and they piled up (1.1 GB of samples beside a 738 MB report)."""
  if not cells_dir.is_dir():
    return
  for file in list(cells_dir.rglob("*.js")):  # listed before any is removed
    if file not in written:
      file.unlink()
  for folder in sorted((d for d in cells_dir.rglob("*") if d.is_dir()), reverse=True):  # children first
    if not any(folder.iterdir()):
      folder.rmdir()


def _js(obj: Any) -> str:
  return json.dumps(obj, separators=(",", ":")).replace("</", "<\\/")


def render_index(manifest: list[dict[str, Any]], absent: list[str] = ()) -> str:
  return PAGE.replace("/*MANIFEST*/", _js(manifest)).replace("/*ABSENT*/", _js(list(absent)))


PAGE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>hieramas-jax: sample browser</title>
<style>
body { font-family: system-ui, sans-serif; margin: 0; color: #222; font-size: 14px; }
header { background: #f4f4f4; padding: .6em 1em; border-bottom: 1px solid #ccc; }
header label { margin-right: .8em; } select, input { font-size: 13px; max-width: 16em; }
main { display: flex; height: calc(100vh - 90px); }
#list { width: 300px; overflow-y: auto; border-right: 1px solid #ccc; margin: 0; padding: 0; list-style: none; }
#list li { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; padding: 3px 8px; cursor: pointer; border-bottom: 1px solid #eee; font-family: monospace; font-size: 12px; }
#list li.sel { background: #dbeafe; } #list li:hover { background: #eef; }
#detail { flex: 1; overflow-y: auto; padding: .5em 1em; display: flex; gap: 1em; align-items: flex-start; }
.col { flex: 1; min-width: 0; }
.ok { color: #137333; font-weight: 600; } .bad { color: #c5221f; font-weight: 600; }
pre { white-space: pre-wrap; word-break: break-word; background: #f7f7f7; padding: .4em; margin: .2em 0;
      max-height: 24em; overflow-y: auto; font-size: 12px; }
table.kv td { padding: 1px 6px; border-bottom: 1px solid #eee; vertical-align: top; }
td[data-gold], td[data-extracted] { white-space: pre-wrap; font-family: monospace; font-size: 12px; }
.missing { color: #a15c00; font-style: italic; }
details { margin: .3em 0; border: 1px solid #e3e3e3; padding: .2em .4em; } summary { cursor: pointer; }
.role { font-size: 11px; color: #555; text-transform: uppercase; }
.inactive { color: #999; }
</style></head><body>
<header>
<b>Sample browser</b> ·
<label>setting <select id="setting"></select></label>
<label>benchmark <select id="benchmark"></select></label>
<label>pool <select id="pool"></select></label>
<label>method <select id="method-a"></select></label>
<label>beside <select id="method-b"></select></label>
<label>show <select id="correct"><option value="all">all queries</option><option value="right">A right</option>
<option value="wrong">A wrong</option><option value="differ">A and B differ</option></select></label>
<label>sort <select id="sort"><option value="id">by id</option><option value="cost-up">cost, cheapest first</option>
<option value="cost-down">cost, dearest first</option></select></label>
<label>search <input id="search" size="16" placeholder="id, question, answer"></label>
<span id="status"></span>
<div><small><a href="../index.html">back to the report</a> · A: the method; B: the method beside it (same
query). Prompts of runs made before traces kept them are "not recorded". The address links to the query
shown. <span id="absent"></span></small></div>
</header>
<main><ul id="list"></ul><div id="detail"><p>Choose a query.</p></div></main>
<script>
"use strict";
const CELLS = /*MANIFEST*/;
const ABSENT = /*ABSENT*/;
const DATA = {}, WAITING = {};
const got = (key, data) => { DATA[key] = data; (WAITING[key] || []).forEach(f => f(data)); };
window.SAMPLES_LOADED = (id, data) => got(id, data);
window.SAMPLES_CHUNK = (id, k, data) => got(id + "/" + k, data);
// A <script> per file, so the page works from file:// with no server; each file once.
function script(key, src) {
  if (DATA[key]) return Promise.resolve(DATA[key]);
  return new Promise((resolve, reject) => {
    (WAITING[key] = WAITING[key] || []).push(resolve);
    if (WAITING[key].length > 1) return;
    const s = document.createElement("script");
    s.src = src;
    s.onerror = () => reject(new Error("cannot load " + s.src));
    document.head.appendChild(s);
  });
}
const load = cell => cell ? script(cell.id, "cells/" + encodeURIComponent(cell.id) + ".js") : Promise.resolve(null);
const loadChunk = (cell, k) => script(cell.id + "/" + k,
  "cells/" + encodeURIComponent(cell.id) + "/" + k + ".js");
const $ = id => document.getElementById(id);
const esc = s => String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
function fill(sel, values, keep, none) {
  const old = keep ? sel.value : null;
  sel.innerHTML = (none ? '<option value="">(none)</option>' : "") +
    values.map(v => `<option value="${esc(v[0])}">${esc(v[1])}</option>`).join("");
  if (old !== null && values.some(v => v[0] === old)) sel.value = old;
}
const uniq = xs => [...new Set(xs)];
function cellOf(method) {
  return CELLS.find(c => c.setting === $("setting").value && c.benchmark === $("benchmark").value &&
                         c.pool === $("pool").value && c.method === method);
}
function refreshSelectors() {
  fill($("setting"), uniq(CELLS.map(c => c.setting)).map(v => [v, v]), true);
  const inSetting = CELLS.filter(c => c.setting === $("setting").value);
  fill($("benchmark"), uniq(inSetting.map(c => c.benchmark)).map(v => [v, v]), true);
  const inBench = inSetting.filter(c => c.benchmark === $("benchmark").value);
  fill($("pool"), uniq(inBench.map(c => c.pool)).map(v => [v, v]), true);
  const here = inBench.filter(c => c.pool === $("pool").value);
  here.sort((x, y) => x.title.localeCompare(y.title));
  const methods = here.map(c => [c.method, `${c.title} (${c.n_correct}/${c.n})`]);
  fill($("method-a"), methods, true);
  fill($("method-b"), methods, true, true);
}
let current = {a: null, b: null, q: null};
const HASH_KEYS = {setting: "setting", benchmark: "benchmark", pool: "pool", a: "method-a", b: "method-b",
                   show: "correct", sort: "sort", search: "search"};
function writeHash() {
  const h = new URLSearchParams();
  Object.entries(HASH_KEYS).forEach(([k, id]) => { if ($(id).value) h.set(k, $(id).value); });
  if (current.q) h.set("q", current.q);
  history.replaceState(null, "", "#" + h.toString());
}
function readHash() {
  const h = new URLSearchParams(location.hash.slice(1));
  return {get: k => h.get(k), q: h.get("q")};
}
async function refresh(initial) {
  const h = initial ? readHash() : null;
  // Each selector is filled from the one before it, so a deep link sets them in order.
  for (const [k, id] of Object.entries(HASH_KEYS)) {
    refreshSelectors();
    if (h && h.get(k) !== null) $(id).value = h.get(k);
  }
  refreshSelectors();
  const ca = cellOf($("method-a").value), cb = $("method-b").value ? cellOf($("method-b").value) : null;
  $("status").textContent = "loading…";
  const [a, b] = await Promise.all([load(ca), load(cb)]);
  current = {a, b, ca, cb, q: h ? h.q : current.q};
  renderList();
  if (current.q && byId(a)[current.q]) await show(current.q); else writeHash();
}
function byId(d) { const m = {}; if (d) d.items.forEach(it => m[it.id] = it); return m; }
function matches(it, s) {
  if (!s) return true;
  s = s.toLowerCase();
  return [it.id, it.question, it.extracted].some(t => t && String(t).toLowerCase().includes(s));
}
function renderList() {
  const {a, b} = current; if (!a) { $("list").innerHTML = ""; return; }
  const bm = byId(b), f = $("correct").value, s = $("search").value.trim();
  const rows = a.items.filter(it => {
    const other = bm[it.id];
    if (!matches(it, s)) return false;
    if (f === "right") return it.correct; if (f === "wrong") return !it.correct;
    if (f === "differ") return other && other.correct !== it.correct;
    return true;
  });
  const sort = $("sort").value;
  if (sort !== "id") rows.sort((x, y) => (sort === "cost-up" ? 1 : -1) * ((+x.cost) - (+y.cost)));
  $("list").innerHTML = rows.map(it => {
    const o = bm[it.id], mark = x => x ? '<span class="ok">✓</span>' : '<span class="bad">✗</span>';
    return `<li data-id="${esc(it.id)}" data-cost="${+it.cost}"${it.id === current.q ? ' class="sel"' : ""}>` +
      `${mark(it.correct)}${o ? mark(o.correct) : ""} <small>$${(+it.cost).toFixed(5)}</small> ${esc(it.id)}</li>`;
  }).join("");
  $("status").textContent = `${rows.length} of ${a.items.length} queries`;
  writeHash();
}
function str(d, i) { return i === null || i === undefined ? null : d.strings[i]; }
function block(text, missingWhat) {
  return text === null ? `<p class="missing">${esc(missingWhat)}: not recorded</p>` : `<pre>${esc(text)}</pre>`;
}
function graphSvg(mas) {
  const n = mas.nodes.length, r = 70, cx = 110, cy = 95;
  const pos = mas.nodes.map((_, k) => [cx + r * Math.cos(2 * Math.PI * k / n - Math.PI / 2),
                                      cy + r * Math.sin(2 * Math.PI * k / n - Math.PI / 2)]);
  const edges = mas.edges.map(([i, j]) => `<line x1="${pos[i][0]}" y1="${pos[i][1]}" x2="${pos[j][0]}" ` +
    `y2="${pos[j][1]}" stroke="#555" marker-end="url(#arrow)"/>`).join("");
  const nodes = mas.nodes.map((nd, k) => `<circle cx="${pos[k][0]}" cy="${pos[k][1]}" r="9" ` +
    `fill="${nd.active ? "#1f77b4" : "#ccc"}"/><text x="${pos[k][0]}" y="${pos[k][1] - 12}" font-size="9" ` +
    `text-anchor="middle" fill="${nd.active ? "#222" : "#999"}">${esc(nd.role || k)}</text>`).join("");
  return `<svg width="220" height="190" role="img" aria-label="graph"><defs><marker id="arrow" viewBox="0 0 10 10" ` +
    `refX="19" refY="5" markerWidth="5" markerHeight="5" orient="auto"><path d="M0,0L10,5L0,10z" fill="#555"/>` +
    `</marker></defs>${edges}${nodes}</svg>`;
}
function masHtml(mas) {
  if (!mas) return "";
  const rows = mas.nodes.map((nd, k) => `<tr class="${nd.active ? "" : "inactive"}"><td>${k}</td>` +
    `<td>${esc(nd.role || "")}${nd.active ? "" : " (inactive)"}</td><td>${esc(nd.proposers.join(", "))}</td>` +
    `<td>${esc(nd.synthesizer || "")}</td></tr>`).join("");
  return `<h4>Configuration</h4><table class="kv" data-mas><tr><th>#</th><th>role</th><th>proposers</th>` +
    `<th>synthesizer</th></tr>${rows}</table><p>decision: ${esc(mas.decision_model || "")}` +
    (mas.graph_kind ? ` · graph ${esc(mas.graph_kind)}` : "") +
    (mas.graph_density !== null && mas.graph_density !== undefined ? ` · density ${(+mas.graph_density).toFixed(2)}` : "") +
    ` · edges ${esc(JSON.stringify(mas.edges))}</p>${graphSvg(mas)}`;
}
function column(d, cell, it) {
  if (!it) return `<div class="col"><h3>${esc(cell.title)}</h3><p class="missing">no such query in this cell</p></div>`;
  const calls = it.calls || [];
  const callHtml = calls.map((c, k) => {
    const msgs = c.messages === null ? '<p class="missing">prompt messages: not recorded</p>' :
      c.messages.map(([role, i]) => `<div class="role">${esc(role)}</div><pre>${esc(str(d, i))}</pre>`).join("");
    return `<details data-call><summary>call ${k + 1}: ${esc(c.position)} · ${esc(c.model)}` +
      `${c.role ? " · " + esc(c.role) : ""} · $${(+c.cost).toFixed(6)} · ${c.pt}+${c.ct} tokens` +
      `${c.cached ? " · cached" : ""}${c.finish && c.finish !== "stop" ? " · " + esc(c.finish) : ""}</summary>` +
      `<h5>prompt</h5>${msgs}<h5>response</h5><pre data-response>${esc(str(d, c.text))}</pre></details>`;
  }).join("");
  return `<div class="col" data-method="${esc(cell.method)}"><h3>${esc(cell.title)} ` +
    `<span class="${it.correct ? "ok" : "bad"}" data-grade>${it.correct ? "correct" : "wrong"}</span></h3>` +
    `<table class="kv"><tr><td>gold answer</td><td data-gold>${esc(str(d, it.target) ?? "not recorded")}</td></tr>` +
    `<tr><td>extracted</td><td data-extracted>${esc(it.extracted ?? "(none)")}</td></tr>` +
    `<tr><td>grader</td><td>${esc(it.detail || "")}</td></tr>` +
    `<tr><td>cost</td><td>$${(+it.cost).toFixed(6)} · ${it.n_calls} calls (${it.cached_calls} cached)</td></tr>` +
    `<tr><td>tokens</td><td>${it.prompt_tokens} prompt + ${it.completion_tokens} completion</td></tr></table>` +
    masHtml(it.mas) + `<h4>Final text</h4>${block(str(d, it.final), "final text")}` +
    `<h4>Calls (${calls.length})</h4>${it.traced ? callHtml : '<p class="missing">calls: not recorded</p>'}</div>`;
}
// A query's detail: the chunk holding it, loaded when the query is opened.
async function detail(cell, d, id) {
  const row = d && byId(d)[id];
  if (!row) return [null, null];
  const chunk = await loadChunk(cell, row.chunk);
  return [chunk, chunk.items[id]];
}
async function show(id) {
  current.q = id;
  const {a, b, ca, cb} = current;
  document.querySelectorAll("#list li").forEach(li => li.classList.toggle("sel", li.dataset.id === id));
  $("status").textContent = "loading…";
  const [[da, ia], [db, ib]] = await Promise.all([detail(ca, a, id), b ? detail(cb, b, id) : [null, null]]);
  const q = ia ? str(da, ia.question) : null;
  $("detail").innerHTML = `<div style="width:100%"><h2>${esc(id)}</h2>${block(q, "question")}` +
    `<div style="display:flex;gap:1em">${column(da, ca, ia)}${b ? column(db, cb, ib) : ""}</div></div>`;
  renderList();
}
$("list").addEventListener("click", e => { const li = e.target.closest("li"); if (li) show(li.dataset.id); });
["setting", "benchmark", "pool", "method-a", "method-b"].forEach(k => $(k).addEventListener("change", () => refresh()));
["correct", "search", "sort"].forEach(k => $(k).addEventListener("input", renderList));
["correct", "sort"].forEach(k => $(k).addEventListener("change", renderList));
$("absent").textContent = ABSENT.length ? `${ABSENT.length} cell(s) of the results have no run directory on ` +
  "this machine and are not listed." : "";
refresh(true);
</script></body></html>
"""
