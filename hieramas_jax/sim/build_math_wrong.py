"""Builds the MATH near-miss answers the sim gives when a draw is wrong.

For every MATH500 item, candidate wrong answers are made from the gold answer by the slips real
models make (off by one, sign, factor 2, inverted fraction, a neighbouring option letter...),
rendered exactly as the sim renders a reply, and kept only if the real grader
(`graders.grade`, math-verify equivalence) marks them wrong and still extracts an answer. At most
`KEEP` (8) are kept, most plausible first: the pool the sim's wrong answers are drawn from, so its
size bounds how often two wrong answers coincide. Run offline:

    python -m hieramas_jax.sim.build_math_wrong   # writes hieramas_jax/data/sim/math_wrong.json
"""

from __future__ import annotations

import json
import re
import sys

from hieramas_jax.benchmarks import graders
from hieramas_jax.benchmarks.data import Item, load_items
from hieramas_jax.sim import reading, render
from hieramas_jax.sim.model import MATH_WRONG_PATH

COMMAND = "python -m hieramas_jax.sim.build_math_wrong"
KEEP = 8
_NUMBER = re.compile(r"\d+")
_INT = re.compile(r"-?\d+")
_FRAC = re.compile(r"^(-?)\\[dt]?frac\{(-?\d+)\}\{(\d+)\}$")
_LETTER = re.compile(r"\((?P<l>[A-E])\)")
_BASE_NUMERAL = re.compile(r"^(?P<digits>[0-9A-Za-z]+)_(?P<base>\{?\d+\}?)$")
_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_FALLBACK_WORDS = ("0", "1", "2", "-1")


def _replace_span(s: str, m: re.Match, new: str) -> str:
  return s[:m.start()] + new + s[m.end():]


def candidates(gold: str) -> list[str]:
  """Near-misses of a gold answer, most plausible first (duplicates and gold filtered later)."""
  g = gold.strip()
  out: list[str] = []
  numeral = _BASE_NUMERAL.match(g)
  if numeral:  # 52_8: a slip in a digit (kept valid in that base), never in the base itself
    digits, base_text = numeral.group("digits"), numeral.group("base")
    base = int(base_text.strip("{}"))
    for pos in (len(digits) - 1, 0):
      d = _DIGITS.index(digits[pos].upper())
      for nd in ((d + 1) % base, (d - 1) % base):
        if pos == 0 and nd == 0 and len(digits) > 1:
          continue  # no leading zero
        out.append(digits[:pos] + _DIGITS[nd] + digits[pos + 1:] + "_" + base_text)
  if _INT.fullmatch(g):
    n = int(g)
    out += [str(n + 1), str(n - 1), str(2 * n), str(-n), str(n + 10), str(n + 2), str(n - 2),
            str(n // 2) if n % 2 == 0 else str(n + 3), str(3 * n), str(n * n) if abs(n) < 1000 else str(n + 100),
            str(n - 10), str(10 * n)]
  frac = _FRAC.match(g)
  if frac:
    sign, a, b = frac.group(1), int(frac.group(2)), int(frac.group(3))
    out += [f"{sign}\\frac{{{b}}}{{{a}}}", f"{sign}\\frac{{{a + 1}}}{{{b}}}",
            f"{sign}\\frac{{{a}}}{{{b + 1}}}", f"{'' if sign else '-'}\\frac{{{a}}}{{{b}}}",
            f"{sign}\\frac{{{a}}}{{{2 * b}}}", f"{sign}\\frac{{{2 * a}}}{{{b}}}",
            f"{sign}\\frac{{{max(a - 1, 1)}}}{{{b}}}", f"{sign}\\frac{{{a}}}{{{b + 2}}}"]
  numbers = list(_NUMBER.finditer(g))
  if numbers:
    for m in (numbers[-1], numbers[0]):
      v = int(m.group())
      out += [_replace_span(g, m, str(v + 1)), _replace_span(g, m, str(v - 1)) if v > 0 else None,
              _replace_span(g, m, str(2 * v if v else 2)), _replace_span(g, m, str(v + 2)),
              _replace_span(g, m, str(v * 3 if v else 3))]
  letter = _LETTER.search(g)
  if letter:
    nxt = "ABCDE"[("ABCDE".index(letter.group("l")) + 1) % 5]
    out.append(_replace_span(g, letter, f"({nxt})"))
  out.append(g[1:] if g.startswith("-") else f"-{g}" if not numbers or len(g) < 12 else None)
  out += [f"2{g}" if not g.startswith("-") else None, f"\\frac{{{g}}}{{2}}" if len(g) < 24 else None,
          f"{g}^2" if len(g) < 12 and "^" not in g else None, *_FALLBACK_WORDS, "3", "4", "6", "12"]
  return [c for c in out if c]


def near_misses(item: Item, keep: int = KEEP) -> list[str]:
  """Candidates the real grader marks wrong, with an extractable answer, distinct by normal form."""
  kept: list[str] = []
  seen = {reading.math_key(item.answer)}
  for cand in candidates(item.answer):
    key = reading.math_key(cand)
    if key in seen:
      continue
    seen.add(key)
    grade = graders.grade(item, render.answer_text(item, cand, 2, False, 0.0))
    if grade.correct or grade.extracted is None:
      continue
    kept.append(cand)
    if len(kept) == keep:
      break
  return kept


def main(argv: list[str]) -> int:
  if len(argv) > 1:
    print(f"usage: {COMMAND}  (takes no arguments)", file=sys.stderr)
    return 2
  wrong = {}
  for i, item in enumerate(load_items("math")):
    wrong[item.id] = near_misses(item)
    if not wrong[item.id]:
      print(f"error: no near-miss found for {item.id} (gold {item.answer!r})", file=sys.stderr)
      return 1
    if i % 100 == 0:
      print(f"{i}: {item.answer!r} -> {wrong[item.id]}")
  MATH_WRONG_PATH.parent.mkdir(parents=True, exist_ok=True)
  tmp = MATH_WRONG_PATH.with_suffix(".tmp")
  tmp.write_text(json.dumps({"command": COMMAND, "checked_with": "graders.grade (math-verify)",
                             "wrong": wrong}, indent=0, sort_keys=True) + "\n")
  tmp.replace(MATH_WRONG_PATH)
  print(f"wrote {MATH_WRONG_PATH}: {sum(map(len, wrong.values()))} near-misses for {len(wrong)} items")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
