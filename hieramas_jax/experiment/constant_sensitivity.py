"""What each hand-chosen constant of the simulated pool moves: low and high alternatives, computed in process.

The parameter listing of `results/calibration.md` names every constant with its source or "assumed"; this
module puts a number on "what it moves" (issue 28, item 3). Each perturbation replaces one constant (or
table) for the duration of a `with` block (module globals of `sim.params`, `sim.reading`, `sim.intent`, or a
field of the served aggregation profile), builds a fresh `BehaviourModel` under it, measures a fixed set of
quantities, and restores the constant and the caches that depend on it. Nothing is written: the served sim's
defaults and its fingerprint are untouched (the module lives outside `hieramas_jax/sim/`, which the
fingerprint hashes).

Why these quantities: the committed conclusions stand on single-call accuracy (Base and CoT: Table 1's fitted
rows, a strong and a weak model, the two benchmarks with a scalar answer), on what a role prompt adds (every
MAS node), on synthesis and voting gains (HieraMAS's supernodes against SC+CoT), on how often a reader takes
answers from another question, and on length (cost, and the deepseek-r1-14b MATH cell the cap cuts).

- `base`/`cot`: the expected accuracy (the sim's own P(correct), exact over the item set: no sampling noise) of
  the suite's Base and CoT prompts (`roles.single_model_messages`);
- `role_agent`: the expected accuracy of one role agent (the calibration's `role_agent` configuration);
- `synthesis_gain`: a supernode of gpt-5-mini + deepseek-v3 + gemma-3-27b proposers under a gpt-5-mini
  synthesizer at T 0.7 (the calibration's `moa_comparable`), its accuracy minus its best proposer's, sampled;
- `sc_gain`: SC+CoT (5 samples, the suite's majority vote) minus its first sample, sampled;
- `adoption`: share of MATH items where gpt-5-mini adopts one of two proposals from another question
  (tests/test_sim_reading.py's protocol), sampled;
- `paraphrase`: the expected accuracy of gpt-5-mini on MATH asked to reason in the five wordings issue 28 measured
  (`PARAPHRASES`, none an exemplar of sim/intent.py): what the intent reader's constants decide;
- `layouts`: the expected accuracy of gpt-5-mini over the layouts issue 28 found unread (Du et al.'s one-line
  MMLU options with text on option D's line; a MATH CoT request followed by an irrelevant sentence with a number,
  or by a length limit): what the reading's constants decide;
- `tokens`: mean completion tokens of gpt-5-mini's CoT call on MATH; `r1_cut`: share of deepseek-r1-14b's Base
  calls on MATH whose completion exceeds the suite's cap of 2048 tokens.

Sampled quantities run the suite's methods against the sim in process (`sim_fit.DirectSimClient`) with seed 0
on a fixed item sample, graded by the sim's own answer keys (`sim_fit.sim_correct`); a change is compared item
by item with the served run (paired), and its noise is the paired standard error.

    from hieramas_jax.experiment.constant_sensitivity import constant_sensitivity
    record = constant_sensitivity()    # ~ minutes on one core
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import math
import time
from typing import Any, Callable, ContextManager, Iterator, Mapping, Sequence

import numpy as np

from hieramas_jax.benchmarks.data import LETTERS, Item
from hieramas_jax.llm.registry import get_model, get_pool
from hieramas_jax.mas import roles
from hieramas_jax.methods.api import RunContext
from hieramas_jax.methods.registry import make_method
from hieramas_jax.sim import fit_theta, intent, reading
from hieramas_jax.sim import params as P
from hieramas_jax.sim.model import BehaviourModel, count_tokens

SEED = 0
# Items per benchmark (a seeded sample: calibration's rule); MATH level constants refit theta on all 500.
N_ITEMS = 300
N_FOREIGN = 150
STRONG, WEAK = "gpt-5-mini", "llama-8b"
REASONER = "deepseek-r1-14b"
CAP = 2048
# Items of the paraphrase and layout quantities (the first of each sample): one call per wording and item.
N_READING = 100
BOXED = "Please put your final answer within \\boxed{}."
# The five wordings issue 28 measured (tests/test_sim_reading.py holds them out of the intent exemplars).
PARAPHRASES = (
    "Solve the problem, showing each step of your derivation.",
    "Provide a detailed solution before giving the final answer.",
    "Walk through the solution carefully, then answer.",
    "Explain how you get the answer.",
    "Show your work.",
)
# Sentences appended after a request that ask nothing of the task (issue 28: the v3 reader lost the item).
APPENDED = ("This request was logged as ticket 4821.", "Keep your final response under 200 words.")
# A change of a sampled quantity within this many paired standard errors is marked as within noise.
NOISE_SE = 2.0

# (key, header, unit, sampled): the quantities, in the table's column order.
QUANTITIES = (
    ("base/gpt-5-mini/math", "Base gpt-5-mini MATH", "pts", False),
    ("cot/gpt-5-mini/math", "CoT gpt-5-mini MATH", "pts", False),
    ("base/gpt-5-mini/mmlu_redux", "Base gpt-5-mini MMLU-R", "pts", False),
    ("cot/gpt-5-mini/mmlu_redux", "CoT gpt-5-mini MMLU-R", "pts", False),
    ("base/llama-8b/math", "Base llama-8b MATH", "pts", False),
    ("cot/llama-8b/math", "CoT llama-8b MATH", "pts", False),
    ("base/llama-8b/mmlu_redux", "Base llama-8b MMLU-R", "pts", False),
    ("cot/llama-8b/mmlu_redux", "CoT llama-8b MMLU-R", "pts", False),
    ("role_agent", "role agent gpt-5-mini (both)", "pts", False),
    ("synthesis_gain", "synthesis gain (both)", "pts", True),
    ("sc_gain", "SC+CoT gain (both)", "pts", True),
    ("adoption", "foreign adoption MATH", "pts", True),
    ("paraphrase", "5 CoT paraphrases gpt-5-mini MATH", "pts", False),
    ("layouts", "issue-28 layouts gpt-5-mini", "pts", False),
    ("tokens", "tokens CoT gpt-5-mini MATH", "tok", False),
    ("r1_cut", "r1-14b MATH cut at 2048", "pts", False),
)
BENCHMARKS = ("math", "mmlu_redux")


# ---- applying one alternative value --------------------------------------------------------------------------


def _sim_caches() -> tuple[Any, ...]:
  """The caches of how a request is read: each depends on reading's and intent's constants, so a perturbation of
  one of those clears them before it measures and again when it restores (else a stale reading leaks either way)."""
  return (reading._read_cached, reading._inline_options, reading._call_line,  # pylint: disable=protected-access
          reading.ItemIndex.recognise, intent.sentence_family, intent.asks_to_reason,
          intent._exemplar_matrix)  # pylint: disable=protected-access


def clear_reading_caches() -> None:
  for cache in _sim_caches():
    cache.cache_clear()


@contextlib.contextmanager
def replaced(module: Any, name: str, value: Any, reads: bool = False) -> Iterator[None]:
  """`module.name = value` inside the block, the old value (and, for `reads`, fresh caches) after it."""
  old = getattr(module, name)
  if reads:
    clear_reading_caches()
  setattr(module, name, value)
  try:
    yield
  finally:
    setattr(module, name, old)
    if reads:
      clear_reading_caches()


@contextlib.contextmanager
def aggregation_field(name: str, value: float) -> Iterator[None]:
  """The served profile with one field replaced (a frozen dataclass: a new `PROFILES` mapping, restored after)."""
  served = P.PROFILES[P.DEFAULT_PROFILE]
  with replaced(P, "PROFILES", {**P.PROFILES, P.DEFAULT_PROFILE: dataclasses.replace(served, **{name: value})}):
    yield


@dataclasses.dataclass(frozen=True)
class Perturbation:
  """One constant's low and high alternatives and how to put one in place.

  Attributes:
    name: the constant as the parameter listing names it.
    status: its status there (assumed, sourced shape...).
    served: the served value, as shown.
    low / high: the alternatives, as shown ("" when there is no second alternative).
    why: why these alternatives (a stated range, half and double, the table's natural cut).
    apply: `apply("low")` / `apply("high")` is a context manager that sets the alternative and restores it.
    reads: the constant changes how a request is read: the reading caches are cleared and the sim builds its own
      item index (else the served run's index and cached readings are shared, which is exact and much faster).
    refit_theta: theta, the CoT gap and the slips are refitted under the alternative (`sim.fit_theta`), as `make`
      would after a change of the difficulty model: Base and CoT stay on their targets, the rest moves.
  """

  name: str
  status: str
  served: str
  low: str
  high: str
  why: str
  apply: Callable[[str], ContextManager]
  reads: bool = False
  refit_theta: bool = False


def _simple(module: Any, name: str, low: Any, high: Any, reads: bool = False) -> Callable[[str], ContextManager]:
  """`apply` for a module global: `low` or `high` in place."""
  return lambda which: replaced(module, name, low if which == "low" else high, reads=reads)


def _scaled_visible(factor: float) -> dict:
  return {d: {k: v * factor for k, v in row.items()} for d, row in P.VISIBLE_TOKENS.items()}


def _exemplars_without(drop: Callable[[tuple[str, str, str]], bool]) -> tuple:
  return tuple(e for e in intent.EXEMPLARS if not drop(e))


@contextlib.contextmanager
def _error_coincidence_math(target: float) -> Iterator[None]:
  """ERROR_COINCIDENCE[math] at `target`: ERROR_SHARED_SPREAD[math] refitted to it as experiments/fit_sim.py does
  (bisection on the between-model coincidence, fewer items and steps than the committed fit)."""
  from hieramas_jax.experiment.sim_fit import fit_items, fit_shared_spread  # pylint: disable=import-outside-toplevel
  spread, _ = fit_shared_spread(BehaviourModel(SEED), "math", fit_items("math", N_ITEMS, SEED), target, steps=8)
  with replaced(P, "ERROR_COINCIDENCE", {**P.ERROR_COINCIDENCE, "math": target}), \
       replaced(P, "ERROR_SHARED_SPREAD", {**P.ERROR_SHARED_SPREAD, "math": spread}):
    yield


def perturbations() -> list[Perturbation]:
  """Every assumed constant of the served sim (and the sourced shape of the temperature penalty), with alternatives."""
  agg = P.PROFILES[P.DEFAULT_PROFILE]
  sigma = P.LATENT_DIFFICULTY_SIGMA
  role_table = reading.ROLE_DOMAIN_KEYWORDS
  kojima = "kojima-takeshi188/zero_shot_cot"
  function_words = reading._FUNCTION_WORDS  # pylint: disable=protected-access
  out = [
      Perturbation("ERROR_COINCIDENCE[math]", "assumed", f"{P.ERROR_COINCIDENCE['math']:g}", "0.15", "0.6",
                   "half, and the multiple-choice rate (the sourced MMLU value); ERROR_SHARED_SPREAD[math] refitted",
                   lambda w: _error_coincidence_math(0.15 if w == "low" else 0.6)),
      Perturbation("ERROR_MODEL_SPREAD", "assumed", f"{P.ERROR_MODEL_SPREAD:g}", "0.35", "1.4", "half / double",
                   _simple(P, "ERROR_MODEL_SPREAD", 0.35, 1.4)),
      Perturbation("MATH_LEVEL_SLOPE", "assumed", f"{P.MATH_LEVEL_SLOPE:g}", "0.3", "1.2",
                   "half / double (theta refitted)", _simple(P, "MATH_LEVEL_SLOPE", 0.3, 1.2), refit_theta=True),
      Perturbation("MATH_LEVEL_NOISE", "assumed", f"{P.MATH_LEVEL_NOISE:g}", "0.15", "0.6",
                   "half / double (theta refitted)", _simple(P, "MATH_LEVEL_NOISE", 0.15, 0.6), refit_theta=True),
      Perturbation("LATENT_DIFFICULTY_SIGMA", "assumed", f"{sigma['mmlu_redux']:g}", "0.85", "3",
                   "MATH's level-based spread (~0.85) / double (theta refitted)",
                   _simple(P, "LATENT_DIFFICULTY_SIGMA", {b: 0.85 for b in sigma}, {b: 3.0 for b in sigma}),
                   refit_theta=True),
      Perturbation("ROLE_FIT", "assumed", f"{P.ROLE_FIT:g}", "0", "0.4", "none / double",
                   _simple(P, "ROLE_FIT", 0.0, 0.4)),
      Perturbation("TEMP_PENALTY", "sourced shape", f"{P.TEMP_PENALTY:g}", "1.5", "6", "half / double",
                   _simple(P, "TEMP_PENALTY", 1.5, 6.0)),
      Perturbation("STRATUM_SIZE", "assumed", f"{P.STRATUM_SIZE}", "1", "50",
                   "no stratification (independent draws) / coarse blocks", _simple(P, "STRATUM_SIZE", 1, 50)),
      Perturbation("CHARS_PER_TOKEN", "assumed", f"{P.CHARS_PER_TOKEN:g}", "3", "5",
                   "the range of English BPE tokenisers", _simple(P, "CHARS_PER_TOKEN", 3.0, 5.0)),
      Perturbation("REASONING_DIFFICULTY_SLOPE", "assumed", f"{P.REASONING_DIFFICULTY_SLOPE:g}", "0", "0.4",
                   "none / double", _simple(P, "REASONING_DIFFICULTY_SLOPE", 0.0, 0.4)),
      Perturbation("REASONING_SIGMA", "assumed", f"{P.REASONING_SIGMA:g}", "0.125", "0.5", "half / double",
                   _simple(P, "REASONING_SIGMA", 0.125, 0.5)),
      Perturbation("VISIBLE_TOKENS (every cell)", "assumed", "sim/params.py", "x0.5", "x2", "half / double",
                   _simple(P, "VISIBLE_TOKENS", _scaled_visible(0.5), _scaled_visible(2.0))),
      Perturbation("Aggregation.dilution_tokens", "assumed", f"{agg.dilution_tokens:g}", "3000", "12000",
                   "half / double", lambda w: aggregation_field("dilution_tokens", 3000.0 if w == "low" else 12000.0)),
      Perturbation("Aggregation.unplaced_support", "assumed", f"{agg.unplaced_support:g}", "0", "1",
                   "never counted / counted as a placed answer (v3)",
                   lambda w: aggregation_field("unplaced_support", 0.0 if w == "low" else 1.0)),
      Perturbation("intent.MIN_SIMILARITY", "assumed", f"{intent.MIN_SIMILARITY:g}", "0.35", "0.55",
                   "+-0.1 around the hand-chosen value", _simple(intent, "MIN_SIMILARITY", 0.35, 0.55, reads=True),
                   reads=True),
      Perturbation("intent.EXEMPLARS", "sourced", "4 families", f"without {kojima}", "without 'direct'",
                   "drop the source of the suite's own CoT wording / drop the bare-answer family",
                   _simple(intent, "EXEMPLARS", _exemplars_without(lambda e: e[2].startswith(kojima)),
                           _exemplars_without(lambda e: e[0] == "direct"), reads=True), reads=True),
      Perturbation("intent.MAX_SENTENCES", "assumed", f"{intent.MAX_SENTENCES}", "20", "80", "half / double",
                   _simple(intent, "MAX_SENTENCES", 20, 80, reads=True), reads=True),
      Perturbation("intent.MAX_SENTENCE_CHARS", "assumed", f"{intent.MAX_SENTENCE_CHARS}", "200", "800",
                   "half / double", _simple(intent, "MAX_SENTENCE_CHARS", 200, 800, reads=True), reads=True),
      Perturbation("reading.FRAME_SENTENCES", "assumed", f"{reading.FRAME_SENTENCES}", "1", "6", "third / double",
                   _simple(reading, "FRAME_SENTENCES", 1, 6, reads=True), reads=True),
      Perturbation("reading.KEY_WORDS", "assumed", f"{reading.KEY_WORDS}", "3", "12", "half / double",
                   _simple(reading, "KEY_WORDS", 3, 12, reads=True), reads=True),
      Perturbation("reading.OPTIONS_WINDOW", "assumed", f"{reading.OPTIONS_WINDOW}", "2000", "8000", "half / double",
                   _simple(reading, "OPTIONS_WINDOW", 2000, 8000, reads=True), reads=True),
      Perturbation("reading.ROLE_DOMAIN_KEYWORDS", "assumed", f"{len(role_table)} domains", "empty",
                   "without 'knowledge'", "no role has a domain / the knowledge roles have none",
                   _simple(reading, "ROLE_DOMAIN_KEYWORDS", (), tuple(r for r in role_table if r[0] != "knowledge"),
                           reads=True), reads=True),
      Perturbation("reading._FUNCTION_WORDS", "assumed", f"{len(function_words)} words", "empty", "",
                   "every word counts as content (the one alternative)",
                   _simple(reading, "_FUNCTION_WORDS", frozenset(), frozenset(), reads=True), reads=True),
  ]
  return out


# Constants of the listing with no row above, and why.
NOT_PERTURBED = (
    ("CORRECT_CODE_PRIOR", "HumanEval+ only: which correct program text a sample gives; no quantity here is code "
                           "(a code vote needs the sandbox, too slow for this table)"),
    ("BEHAVIOUR (verbosity, reasoning lengths, latency)", "per-model style cells; VISIBLE_TOKENS and the reasoning "
                                                          "shape constants stand for the length model"),
    ("mechanism.Population.sigma_b, aggregation_fit.TOKENS_PER_CANDIDATE, rows with n_assumed, GRID bounds",
     "constants of the fit harness, not of the served sim: they move the fitted profile, which moves the served "
     "quantities only after a refit (`make fit-sim`, minutes per point); the profile likelihood table shows how "
     "far the data leave each parameter free"),
)


# ---- measuring -------------------------------------------------------------------------------------------------


def _temperature(model: str, requested: float) -> float:
  """The temperature the sim applies: a fixed-temperature model (GPT-5) is sent none and gets the default."""
  return P.DEFAULT_TEMPERATURE if get_model(model).fixed_temperature else requested


@functools.lru_cache(maxsize=4)
def _items(n_items: int) -> dict[str, list[Item]]:
  from hieramas_jax.experiment.calibration import calibration_items  # pylint: disable=import-outside-toplevel
  return {b: calibration_items(b, n_items, SEED) for b in BENCHMARKS}


def _expected(sim: BehaviourModel, model: str, item: Item, messages: Sequence[dict], temperature: float) -> float:
  view = reading.read_request(messages, sim.index)
  if view.recognised is None or view.recognised.item.id != item.id:
    return 0.0  # not recognised: answered at chance, counted as wrong (a change of reading shows as a loss)
  return sim.p_correct(model, item, view, _temperature(model, temperature))


def _run(sim: BehaviourModel, method: Any, pool: str, items: Sequence[Item]) -> list[Any]:
  from hieramas_jax.experiment.sim_fit import DirectSimClient  # pylint: disable=import-outside-toplevel
  client = DirectSimClient(sim)

  async def go():
    ctx = RunContext(client, get_pool(pool), sim.seed)
    return [await method.solve(ctx, it) for it in items]
  return asyncio.run(go())


def measure(sim: BehaviourModel) -> dict[str, np.ndarray]:
  """Per-item values of every quantity (expected accuracies in [0, 1], sampled ones 0/1 or -1/0/1, tokens)."""
  from hieramas_jax.experiment.calibration import COLLABORATION  # pylint: disable=import-outside-toplevel
  from hieramas_jax.experiment.heldout_prompts import MOA_SYSTEM  # pylint: disable=import-outside-toplevel
  from hieramas_jax.experiment.sim_fit import sim_correct  # pylint: disable=import-outside-toplevel
  items = _items(N_ITEMS)
  both = items["math"] + items["mmlu_redux"]
  out: dict[str, np.ndarray] = {}
  for b in BENCHMARKS:
    for model in (STRONG, WEAK):
      for prompt, cot in (("base", False), ("cot", True)):
        out[f"{prompt}/{model}/{b}"] = np.array([_expected(sim, model, it, roles.single_model_messages(it, cot=cot),
                                                           0.2) for it in items[b]])
  role_traces = _run(sim, COLLABORATION["role_agent"][1](), STRONG, both)
  out["role_agent"] = np.array([_expected(sim, STRONG, it, t.calls[0].messages, 0.2)
                                for it, t in zip(both, role_traces)])
  gains = []
  for b in BENCHMARKS:
    traces = _run(sim, COLLABORATION["moa_comparable"][1](), STRONG, items[b])
    final = np.array([sim_correct(sim, it, t.final_text) for it, t in zip(items[b], traces)], float)
    props = np.array([[sim_correct(sim, it, c.text) for c in t.calls if c.position.startswith("proposer:")]
                      for it, t in zip(items[b], traces)], float)
    gains.append(final - props[:, int(np.argmax(props.mean(axis=0)))])
  out["synthesis_gain"] = np.concatenate(gains)
  traces = _run(sim, make_method("sc_cot"), STRONG, both)
  out["sc_gain"] = np.array([sim_correct(sim, it, t.final_text) - sim_correct(sim, it, t.calls[0].text)
                             for it, t in zip(both, traces)], float)
  math_items = items["math"][:N_FOREIGN]
  adopted = []
  for i, it in enumerate(math_items):
    other = math_items[(i + 1) % len(math_items)]
    cot = roles.single_model_messages(other, cot=True)
    foreign = [sim.reply(STRONG, cot, 1.0, None, k).text for k in range(2)]
    msgs = [{"role": "system", "content": MOA_SYSTEM + "".join(f"\n{k}. {p}" for k, p in enumerate(foreign, 1))},
            {"role": "user", "content": roles.question_block(it, cot=False)}]
    adopted.append(float(sim.reply(STRONG, msgs, 1.0, None, 0).adopted))
  out["adoption"] = np.array(adopted)
  out["paraphrase"] = np.array([
      np.mean([_expected(sim, STRONG, it, _user(it, BOXED, w), 1.0) for w in PARAPHRASES])
      for it in items["math"][:N_READING]])
  out["layouts"] = np.array(
      [_expected(sim, STRONG, it, du_mmlu(it, " (logged as ticket 4821)"), 1.0)
       for it in items["mmlu_redux"][:N_READING]]
      + [np.mean([_expected(sim, STRONG, it, _user(it, BOXED, roles.STEP_BY_STEP, a), 1.0) for a in APPENDED])
         for it in items["math"][:N_READING]])
  lengths = []
  for it in items["math"]:
    r = sim.reply(STRONG, roles.single_model_messages(it, cot=True), 1.0, None, 0)
    lengths.append(r.reasoning_tokens + count_tokens(r.text))
  out["tokens"] = np.array(lengths, float)
  cut = []
  for it in items["math"]:
    r = sim.reply(REASONER, roles.single_model_messages(it, cot=False), 0.2, None, 0)
    cut.append(float(r.reasoning_tokens + count_tokens(r.text) > CAP))
  out["r1_cut"] = np.array(cut)
  return out


def _user(item: Item, *extra: str) -> list[dict]:
  """A user turn only: the question, then each extra paragraph (another codebase's layout, not the suite's)."""
  return [{"role": "user", "content": "\n\n".join((item.question.rstrip(),) + extra)}]


def du_mmlu(item: Item, appended_to_d: str = "") -> list[dict]:
  """Du et al.'s one-line MMLU question (composable-models/llm_multiagent_debate, mmlu/gen_mmlu.py), with
  `appended_to_d` on option D's line."""
  options = ", ".join(f"{letter}) {choice}" + (appended_to_d if letter == "D" else "")
                      for letter, choice in zip(LETTERS, item.meta["choices"]))
  return [{"role": "user", "content": f"Can you answer the following question as accurately as possible? "
                                      f"{item.meta['stem']}: {options} Explain your answer, putting the answer "
                                      f"in the form (X) at the end of your response."}]


def build_sim(index: reading.ItemIndex | None = None, refit_theta: bool = False) -> BehaviourModel:
  """A sim under the constants now in place (a shared item index when the reading is unchanged)."""
  sim = BehaviourModel(SEED)
  if index is not None:
    sim.index = index
  if refit_theta:
    fitted = fit_theta.fit()
    sim.theta, sim.cot_gap, sim.slip = fitted["theta"], fitted["cot_gap"], fitted["slip"]
  return sim


def _scale(key: str) -> float:
  return 1.0 if key == "tokens" else 100.0


def _summary(base: Mapping[str, np.ndarray], alt: Mapping[str, np.ndarray]) -> dict[str, dict[str, Any]]:
  """Per quantity: the change (alternative minus served, in points or tokens) and its paired standard error."""
  out = {}
  for key, _, _, sampled in QUANTITIES:
    d = (alt[key] - base[key]) * _scale(key)
    se = float(d.std(ddof=1) / math.sqrt(len(d))) if sampled and len(d) > 1 else 0.0
    delta = float(d.mean())
    out[key] = {"delta": round(delta, 2), "se": round(se, 2),
                "within_noise": bool(sampled and abs(delta) <= NOISE_SE * se)}
  return out


def constant_sensitivity(selected: Sequence[str] | None = None, progress: Callable[[str], None] | None = None
                         ) -> dict[str, Any]:
  """The record: served levels, and per constant its alternatives and what each moves (calibration.json's
  `constant_sensitivity`). `selected`: only these constants (tests)."""
  started = time.perf_counter()
  clear_reading_caches()
  served_sim = build_sim()
  base = measure(served_sim)
  levels = {}
  for key, _, _, sampled in QUANTITIES:
    v = base[key] * _scale(key)
    levels[key] = {"value": round(float(v.mean()), 2), "n": len(v),
                   "se": round(float(v.std(ddof=1) / math.sqrt(len(v))), 2) if sampled else 0.0}
  rows = []
  for p in perturbations():
    if selected is not None and p.name not in selected:
      continue
    row = {"name": p.name, "status": p.status, "served": p.served, "low": p.low, "high": p.high, "why": p.why,
           "refit_theta": p.refit_theta, "changes": {}}
    for which in ("low", "high"):
      if not getattr(p, which):
        continue
      with p.apply(which):
        alt = measure(build_sim(None if p.reads else served_sim.index, p.refit_theta))
      row["changes"][which] = _summary(base, alt)
    rows.append(row)
    if progress:
      progress(f"{p.name}: done ({time.perf_counter() - started:.0f} s)")
  return {"seed": SEED, "n_items": {b: len(v) for b, v in _items(N_ITEMS).items()}, "n_foreign": N_FOREIGN,
          "noise_se": NOISE_SE, "quantities": [{"key": k, "header": h, "unit": u, "sampled": s}
                                               for k, h, u, s in QUANTITIES],
          "served": levels, "rows": rows, "not_perturbed": [{"name": n, "why": w} for n, w in NOT_PERTURBED],
          "seconds": round(time.perf_counter() - started, 1)}
