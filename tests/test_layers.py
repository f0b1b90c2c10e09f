"""The layer rules of docs/architecture.md, read from the code: every import points down, none in a cycle.

Why an AST walk and not importlib: it sees every import statement, including those inside functions
(a lazy import is still an arrow), without running any module.
"""

from __future__ import annotations

import ast
import pathlib

from hieramas_jax.paths import REPO_DIR

PACKAGE = REPO_DIR / "hieramas_jax"

# Bottom to top. A unit is a subpackage or a top-level module of hieramas_jax; a unit may import only
# units that come before it. Units on one line (a tuple) share a floor and may not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("paths", "errors", "aio", "procs"),
    ("fileio", "isa"),  # isa: the numeric kernels' pin, set by the package's __init__ before anything loads
    ("benchmarks", "llm"),
    ("mas",),
    ("sim",),  # above mas only for its diagnostic tool sim/truncation.py (the served sim: see below)
    ("learn",),
    ("methods",),
    ("experiment",),
    ("report",),
    ("bench",),  # the speed benchmarks; above report: bench/table1.py times report/paper.py's Table 1 rows
)
FLOOR = {unit: floor for floor, units in enumerate(LAYERS) for unit in units}

# What the served simulator may load: it sees only the HTTP request, so it must not reach the suite's
# prompts (mas/), its methods or its runner.
SIM_SERVER_MAY_NOT_REACH = ("hieramas_jax.mas", "hieramas_jax.learn", "hieramas_jax.methods",
                            "hieramas_jax.experiment", "hieramas_jax.report")


def _module_name(path: pathlib.Path) -> str:
  parts = path.relative_to(REPO_DIR).with_suffix("").parts
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: pathlib.Path) -> list[tuple[str, int]]:
  """(absolute module name, line) of every hieramas_jax import in a file, relative ones resolved."""
  tree = ast.parse(path.read_text(encoding="utf-8"))
  here = _module_name(path).split(".")
  package = here if path.name == "__init__.py" else here[:-1]
  found = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      found += [(alias.name, node.lineno) for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
      found.append((base, node.lineno))
      found += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
  return [(name, line) for name, line in found if name.startswith("hieramas_jax.")]


def _unit(module: str) -> str:
  return module.split(".")[1]


def _library_files() -> list[pathlib.Path]:
  return sorted(p for p in PACKAGE.rglob("*.py") if "data" not in p.relative_to(PACKAGE).parts[:1])


def test_every_unit_is_placed_in_a_layer():
  units = {p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in _library_files()} - {"__init__"}
  assert units - set(FLOOR) == set(), "place the new unit in LAYERS and in docs/architecture.md"


def test_every_import_points_down():
  upward = set()
  for path in _library_files():
    module = _module_name(path)
    if module == "hieramas_jax":
      continue
    src = _unit(module)
    for target, line in _imports(path):
      dst = _unit(target)
      if dst != src and dst in FLOOR and FLOOR[dst] >= FLOOR[src]:
        upward.add(f"{path.relative_to(REPO_DIR)}:{line} {src} -> {dst}")
  assert sorted(upward) == []


def _module_graph() -> dict[str, set[str]]:
  files = {_module_name(p): p for p in _library_files()}
  graph = {}
  for module, path in files.items():
    targets = set()
    for target, _ in _imports(path):
      # `from pkg import name` names a module or an attribute: keep the longest prefix that is a module.
      while target and target not in files:
        target = target.rpartition(".")[0]
      if target and target != module:
        targets.add(target)
    graph[module] = targets
  return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
  """One import cycle among modules, or None. Package __init__ files that only document count too."""
  state: dict[str, int] = {}
  stack: list[str] = []

  def visit(node: str) -> list[str] | None:
    state[node] = 1
    stack.append(node)
    for nxt in sorted(graph.get(node, ())):
      if state.get(nxt) == 1:
        return stack[stack.index(nxt):] + [nxt]
      if nxt not in state:
        found = visit(nxt)
        if found:
          return found
    stack.pop()
    state[node] = 2
    return None

  for node in sorted(graph):
    if node not in state:
      found = visit(node)
      if found:
        return found
  return None


def test_no_import_cycle_between_modules():
  assert _cycle(_module_graph()) is None


def test_the_cycle_finder_finds_a_cycle():
  assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
  assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_the_served_sim_cannot_reach_the_suites_prompts_or_methods():
  graph = _module_graph()
  reached, todo = set(), ["hieramas_jax.sim.server", "hieramas_jax.sim.serve"]
  while todo:
    module = todo.pop()
    if module not in reached:
      reached.add(module)
      todo += graph.get(module, ())
  assert sorted(m for m in reached if m.startswith(SIM_SERVER_MAY_NOT_REACH)) == []


def test_entry_points_do_not_edit_sys_path():
  offenders = []
  for path in sorted((REPO_DIR / "experiments").rglob("*.py")) + sorted((REPO_DIR / "launch").rglob("*.py")):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
      if (isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name)
          and node.value.id == "sys"):
        offenders.append(str(path.relative_to(REPO_DIR)))
  assert offenders == []


def _top_level_names(path: pathlib.Path) -> tuple[set[str], set[str]]:
  """(names a module defines at top level, names it only imports)."""
  defined, imported = set(), set()
  for node in ast.parse(path.read_text(encoding="utf-8")).body:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
      imported.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
      continue
    for sub in ast.walk(node):
      if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        defined.add(sub.name)
      elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
        defined.add(sub.id)
  return defined, imported - defined


def test_every_name_is_imported_from_its_home():
  """One name, one home: `from hieramas_jax.a import x` takes `x` from the module that defines it, never
  through another module that merely imports it (a re-export keeps a moved name alive in two places)."""
  modules = {_module_name(p): p for p in _library_files()}
  homes = {m: _top_level_names(p)[0] for m, p in modules.items()}
  files = (_library_files() + sorted((REPO_DIR / "experiments").rglob("*.py"))
           + sorted((REPO_DIR / "launch").rglob("*.py")) + sorted((REPO_DIR / "tests").rglob("*.py")))
  borrowed = []
  for path in files:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
      if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in homes:
        for alias in node.names:
          if alias.name not in homes[node.module] and f"{node.module}.{alias.name}" not in modules:
            borrowed.append(f"{path.relative_to(REPO_DIR)}:{node.lineno} {node.module}.{alias.name}")
  assert borrowed == []
