"""Builds the HumanEval+ programs the sim answers with: mutants (wrong) and variants (right).

Each mutant is the task's complete function (prompt + canonical body) with one small slip in the
body, the kind real models make: a flipped comparison, an off-by-one constant, `and`/`or`
swapped, an arithmetic operator changed, a `not` dropped, a branch dropped (its test made
False). Only the canonical body is touched (the prompt, docstring and helpers stay verbatim), by
splicing the re-printed node into the original source, so a mutant looks like the canonical
code everywhere else.

A mutant is kept only if the real grader (`graders.grade_async`: HumanEval+ base and plus tests
in the sandbox) fails it on a test; mutants that only time out are dropped, because grading a
timeout costs its time limit every time the sim emits it. At most `KEEP` per task, in a
seeded order.

Variants are the canonical function written differently but equivalently (local names renamed,
a returned expression bound to a name first), each kept only if the sandbox passes it on every
base and plus test. They exist because two correct programs from two samples are rarely the same
text: with only the canonical solution, every correct sample would vote for one program and
self-consistency on code would gain far more than it does on real models.

Run offline (several minutes on 2 cores):

    python -m hieramas_jax.sim.build_mutants  # writes hieramas_jax/data/sim/humaneval_mutants.json.gz
"""

from __future__ import annotations

import ast
import asyncio
import gzip
import io
import json
import keyword
import re
import sys
import tokenize
from typing import Iterator

import numpy as np

from hieramas_jax.benchmarks import graders
from hieramas_jax.benchmarks.data import Item, load_items
from hieramas_jax.sim import render
from hieramas_jax.sim.hashing import seed_int
from hieramas_jax.sim.model import MUTANTS_PATH

COMMAND = "python -m hieramas_jax.sim.build_mutants"
KEEP = 6
MAX_TRIES = 20
KEEP_VARIANTS = 3
BUILD_SEED = 0

_COMPARE_FLIP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
                 ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot,
                 ast.IsNot: ast.Is}
_NAME_SWAP = {"min": "max", "max": "min", "any": "all", "all": "any", "upper": "lower",
              "lower": "upper", "startswith": "endswith", "endswith": "startswith", "isupper": "islower",
              "islower": "isupper", "sorted": "reversed", "abs": "int"}
_BINOP_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add, ast.FloorDiv: ast.Mult,
               ast.Mod: ast.FloorDiv, ast.Div: ast.Mult}


class _Source:
  """Line/column -> offset mapping for splicing."""

  def __init__(self, text: str):
    self.text = text
    self.starts = [0]
    for line in text.splitlines(keepends=True):
      self.starts.append(self.starts[-1] + len(line))

  def offset(self, line: int, col: int) -> int:
    # ast columns are UTF-8 byte offsets.
    line_text = self.text[self.starts[line - 1]:self.starts[line]] if line < len(self.starts) else ""
    return self.starts[line - 1] + len(line_text.encode("utf-8")[:col].decode("utf-8", "replace"))

  def splice(self, node: ast.AST, new: str) -> str:
    a = self.offset(node.lineno, node.col_offset)
    b = self.offset(node.end_lineno, node.end_col_offset)
    return self.text[:a] + new + self.text[b:]


def mutants_of(item: Item) -> Iterator[tuple[int, str, str]]:
  """(tier, description, complete mutated function) for every single-slip mutation of the body.

  Tier 0: the classic slips; tier 1: a wrong builtin/method or string constant; tier 2: a
  return value off by one (last resort for one-line bodies).
  """
  full = item.question + item.answer
  src = _Source(full)
  body_first_line = item.question.count("\n") + 1
  tree = ast.parse(full)
  for node in ast.walk(tree):
    if getattr(node, "lineno", 0) < body_first_line or not hasattr(node, "end_lineno"):
      continue
    copies: list[tuple[int, str, ast.AST]] = []
    if isinstance(node, ast.Compare) and type(node.ops[0]) in _COMPARE_FLIP:
      new = ast.Compare(node.left, [_COMPARE_FLIP[type(node.ops[0])]()] + node.ops[1:],
                        node.comparators)
      copies.append((0, "flip comparison", new))
    elif isinstance(node, ast.Constant) and type(node.value) is int:
      copies.append((0, "constant +1", ast.Constant(node.value + 1)))
      if node.value != 0:
        copies.append((0, "constant -1", ast.Constant(node.value - 1)))
    elif isinstance(node, ast.Constant) and type(node.value) is bool:
      copies.append((1, "flip bool", ast.Constant(not node.value)))
    elif isinstance(node, ast.Constant) and type(node.value) is str:
      v = node.value
      new_v = " " if v == "" else (v[:-1] if len(v) > 1 else (v.swapcase() if v.swapcase() != v else ""))
      copies.append((1, "string constant", ast.Constant(new_v)))
    elif isinstance(node, ast.Name) and node.id in _NAME_SWAP:
      copies.append((1, "wrong builtin", ast.Name(_NAME_SWAP[node.id])))
    elif isinstance(node, ast.Attribute) and node.attr in _NAME_SWAP:
      copies.append((1, "wrong method", ast.Attribute(node.value, _NAME_SWAP[node.attr])))
    elif isinstance(node, ast.BoolOp):
      other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
      copies.append((0, "swap and/or", ast.BoolOp(other, node.values)))
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAP:
      copies.append((0, "swap arithmetic",
                     ast.BinOp(node.left, _BINOP_SWAP[type(node.op)](), node.right)))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
      copies.append((0, "drop not", node.operand))
    elif isinstance(node, (ast.If, ast.While)):
      copies.append((0, "drop branch", ast.Constant(False)))
      node = node.test
    elif isinstance(node, ast.Return) and node.value is not None:
      copies.append((2, "return off by one", ast.BinOp(node.value, ast.Add(), ast.Constant(1))))
      node = node.value
    for tier, desc, new_node in copies:
      text = ast.unparse(new_node)
      mutated = src.splice(node, text)
      try:
        ast.parse(mutated)
      except SyntaxError:
        continue
      if mutated != full:
        yield tier, desc, mutated


_SYNONYMS = {"result": ("res", "out", "answer"), "res": ("result", "out", "acc"), "ans": ("result", "answer", "res"),
             "i": ("idx", "k", "pos"), "j": ("jdx", "m", "pos2"), "n": ("num", "size", "count_n"),
             "count": ("cnt", "total", "tally"), "s": ("text", "string", "chars"), "x": ("value", "item", "elem"),
             "l": ("lst", "items", "seq"), "total": ("acc", "sum_val", "running"), "num": ("number", "val", "n_val")}
_RETURN_LINE = re.compile(r"^(?P<indent>[ \t]+)return (?P<expr>[^\n#]+)$", re.M)


def _local_names(full: str, body_first_line: int, entry_point: str) -> list[str]:
  """Names the body binds (assignments, loop and comprehension targets), not the arguments."""
  tree = ast.parse(full)
  args: set[str] = set()
  for node in ast.walk(tree):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
      args |= {a.arg for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs}
      args |= {a.arg for a in (node.args.vararg, node.args.kwarg) if a is not None}
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
      args.add(node.name)
  names = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.lineno >= body_first_line \
        and node.id not in args and node.id != entry_point and node.id not in names:
      names.append(node.id)
  return names


def _rename(body: str, mapping: dict[str, str]) -> str | None:
  """`body` with NAME tokens renamed (strings and comments untouched), or None if it won't tokenize."""
  try:
    tokens = list(tokenize.generate_tokens(io.StringIO(body).readline))
  except (tokenize.TokenError, IndentationError, SyntaxError):
    return None
  lines = body.splitlines(keepends=True)
  edits = [(t.start, t.end, mapping[t.string]) for t in tokens if t.type == tokenize.NAME and t.string in mapping]
  for (row, c0), (_, c1), new in sorted(edits, reverse=True):
    line = lines[row - 1]
    lines[row - 1] = line[:c0] + new + line[c1:]
  return "".join(lines)


def variants_of(item: Item) -> Iterator[str]:
  """Equivalent rewrites of the canonical function, most natural first (verified by the caller)."""
  full = item.question + item.answer
  body_first_line = item.question.count("\n") + 1
  taken = {t for t in re.findall(r"[A-Za-z_]\w*", full)} | set(keyword.kwlist) | set(dir(__builtins__))
  local = _local_names(full, body_first_line, item.meta["entry_point"])
  for k in range(3):
    mapping = {}
    for name in local:
      options = list(_SYNONYMS.get(name, ())) + [f"{name}_{k + 1}", f"{name}{k + 2}"]
      new = next((o for o in options[k:] + options[:k] if o not in taken and o not in mapping.values()), None)
      if new:
        mapping[name] = new
    if mapping:
      body = _rename(item.answer, mapping)
      if body and body != item.answer:
        yield item.question + body
  match = _RETURN_LINE.search(item.answer)
  if match and match.group("expr").count("(") == match.group("expr").count(")"):
    name = next(n for n in ("result", "value", "out_value") if n not in taken)
    indent, expr = match.group("indent"), match.group("expr").rstrip()
    rewritten = item.answer[:match.start()] + f"{indent}{name} = {expr}\n{indent}return {name}" \
        + item.answer[match.end():]
    yield item.question + rewritten


GRADE_TIMEOUT_S = 120.0


class HarnessFailure(RuntimeError):
  """The grader could not judge this task at all (e.g. its canonical solution fails in the sandbox)."""


async def _grade_code(item: Item, code: str) -> graders.Grade | None:
  """The real grade of a reply carrying `code`, or None if grading this mutant hung."""
  try:
    return await asyncio.wait_for(
        graders.grade_async(item, render.answer_text(item, code, 0, False, 0.0)), GRADE_TIMEOUT_S)
  except asyncio.TimeoutError:
    print(f"warning: grading a mutant of {item.id} hung for {GRADE_TIMEOUT_S:.0f} s; skipped",
          file=sys.stderr, flush=True)
    return None
  except Exception as e:  # the harness, not the mutant: reported per task by the caller
    raise HarnessFailure(f"{item.id}: {type(e).__name__}: {e}") from e


async def mutants_for(item: Item, keep: int = KEEP) -> list[str]:
  """Up to `keep` mutants that fail a base or plus test (not by timing out), seeded order."""
  by_code: dict[str, int] = {}
  for tier, _, code in mutants_of(item):
    by_code[code] = min(tier, by_code.get(code, tier))
  rng = np.random.default_rng(seed_int("mutants", BUILD_SEED, item.id))
  # Plausible slips first (shuffled within a tier), last resorts last.
  codes = list(by_code)
  order = sorted(rng.permutation(len(codes)), key=lambda i: by_code[codes[i]])[:MAX_TRIES]
  kept: list[str] = []
  for i in order:
    code = codes[i]
    g = await _grade_code(item, code)
    if g is not None and not g.correct and g.detail.startswith("failed at") \
        and "time limit" not in g.detail:
      kept.append(code)
      if len(kept) == keep:
        break
  return kept


async def variants_for(item: Item, keep: int = KEEP_VARIANTS) -> list[str]:
  """Up to `keep` equivalent rewrites that pass every base and plus test, distinct as code."""
  from hieramas_jax.sim import reading  # pylint: disable=import-outside-toplevel
  seen = {reading.code_key(item.question + item.answer)}
  kept: list[str] = []
  for code in variants_of(item):
    key = reading.code_key(code)
    if key in seen:
      continue
    seen.add(key)
    try:
      ast.parse(code)
    except SyntaxError:
      continue
    g = await _grade_code(item, code)
    if g is not None and g.correct:
      kept.append(code)
      if len(kept) == keep:
        break
  return kept


async def _build(items: list[Item]) -> tuple[dict[str, list[str]], dict[str, list[str]], dict[str, str]]:
  """Mutants and variants per task, and the tasks the grader could not judge (task id -> why)."""
  out: dict[str, list[str]] = {}
  variants: dict[str, list[str]] = {}
  failures: dict[str, str] = {}
  # One task at a time: the sandbox already uses the cores.
  for item in items:
    try:
      out[item.id] = await mutants_for(item)
      variants[item.id] = await variants_for(item)
    except HarnessFailure as e:
      failures[item.id] = str(e)
      print(f"error: {e}", file=sys.stderr, flush=True)
      continue
    print(f"{item.id}: {len(out[item.id])} mutants, {len(variants[item.id])} variants", flush=True)
  return out, variants, failures


def main(argv: list[str]) -> int:
  if len(argv) > 1:
    print(f"usage: {COMMAND}  (takes no arguments)", file=sys.stderr)
    return 2
  items = list(load_items("humaneval_plus"))
  mutants, variants, failures = asyncio.run(_build(items))
  empty = [k for k, v in mutants.items() if not v]
  if empty:
    print(f"error: no failing mutant for {empty}", file=sys.stderr)
    return 1
  # Tasks the grader cannot judge (a harness problem) get their first plausible mutants,
  # listed as unverified, so the sim can still serve; the build then exits non-zero and the
  # tests fail until a rebuild verifies them.
  for task_id in failures:
    item = next(it for it in items if it.id == task_id)
    mutants[task_id] = [code for _, _, code in sorted(mutants_of(item), key=lambda t: t[0])][:KEEP]
    variants[task_id] = []
  MUTANTS_PATH.parent.mkdir(parents=True, exist_ok=True)
  tmp = MUTANTS_PATH.with_suffix(".tmp")
  # mtime=0: the same mutants give the same bytes (no spurious diffs on rebuild).
  with gzip.GzipFile(tmp, "wb", mtime=0) as raw, io.TextIOWrapper(raw, encoding="utf-8") as f:
    json.dump({"command": COMMAND, "checked_with": "graders.grade_async (HumanEval+ sandbox, base+plus)",
               "unverified": failures, "mutants": {it.id: mutants[it.id] for it in items},
               "variants": {it.id: variants[it.id] for it in items}}, f, indent=0)
  tmp.replace(MUTANTS_PATH)
  print(f"wrote {MUTANTS_PATH}: {sum(map(len, mutants.values()))} mutants and "
        f"{sum(map(len, variants.values()))} variants for {len(items)} tasks")
  if failures:
    print(f"error: {len(failures)} task(s) could not be graded, mutants unverified: {sorted(failures)}; "
          f"rerun `{COMMAND}` once the sandbox passes their canonical solutions", file=sys.stderr)
    return 3
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
