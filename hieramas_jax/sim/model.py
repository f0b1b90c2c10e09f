"""The behaviour model of the simulated pool: who answers what, right or wrong, and how long.

A request becomes a reply in five steps, each a pure function of (server seed, model, messages,
sampling parameters, sample index):

1. read the request (`reading.read_request`): item and its lettering, whether it asks to reason, role,
   candidate answers found anywhere in the prompt;
2. own competence: logit = theta[model, benchmark] - b[item] + fit[role, domain]
   + cot[domain] * reasons - temperature_penalty(T)  (item response theory, 1PL);
3. own attempt: correct iff Phi(z) < sigmoid(logit) with z = sqrt(rho(T)) z_persist(model, item)
   + sqrt(1 - rho(T)) z_sample(request); which right or wrong answer (from the item's pools) is
   drawn the same correlated way, so low-temperature samples repeat themselves;
4. context: with candidate answers in the prompt, the final answer is a Luce choice among the
   distinct answers present, the own attempt included: support pulls, a correct answer is
   recognised with a strength that grows with competence (`params.Aggregation`, the served
   profile's fitted values);
5. render the text in the benchmark's format (`render`), count tokens, add hidden reasoning.

Unknown questions get an answer in the format the prompt asks for, from a fallback competence
(`_unknown_reply`): correct only by chance, since the sim knows no gold answer for them.

See docs/simulator.md for every parameter and its source.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import gzip
import json
import math
import re
from typing import Mapping, Sequence

import numpy as np

from hieramas_jax.benchmarks.data import BENCHMARKS, DOMAIN, LETTERS, Item, load_items
from hieramas_jax.llm.registry import MODELS
from hieramas_jax.paths import DATA_DIR
from hieramas_jax.sim import params as P
from hieramas_jax.sim import reading, render
from hieramas_jax.sim.calibration_targets import TARGETS, sigmoid
from hieramas_jax.sim.hashing import inv_phi, messages_fingerprint, normals, phi, seed_int, uniforms

SIM_DATA_DIR = DATA_DIR / "sim"
THETA_PATH = SIM_DATA_DIR / "theta.json"
MATH_WRONG_PATH = SIM_DATA_DIR / "math_wrong.json"
MUTANTS_PATH = SIM_DATA_DIR / "humaneval_mutants.json.gz"


class SimDataError(RuntimeError):
  """A precomputed sim artefact is missing or does not match the benchmark data."""


# MMLU subjects on which a math role also fits (the role is about the item's actual content).
_MMLU_MATH_SUBJECTS = ("math", "algebra", "statistics")


def item_difficulty(item: Item) -> float:
  """b[item]: fixed for the simulated world (DIFFICULTY_SEED), independent of the server seed."""
  rng = np.random.default_rng(seed_int("difficulty", P.DIFFICULTY_SEED, item.benchmark, item.id))
  if item.benchmark == "math":
    return P.MATH_LEVEL_SLOPE * (int(item.meta["level"]) - 3) + P.MATH_LEVEL_NOISE * rng.normal()
  return P.LATENT_DIFFICULTY_SIGMA[item.benchmark] * rng.normal()


def all_difficulties(benchmark: str) -> np.ndarray:
  return np.array([item_difficulty(it) for it in load_items(benchmark)])


def role_fit(role: str | None, item: Item) -> float:
  """+ROLE_FIT when the role's domain matches the item's, -ROLE_FIT when not, 0 without one."""
  domain = reading.role_domain(role)
  if domain is None:
    return 0.0
  if domain == item.domain:
    return P.ROLE_FIT
  if domain == "math" and item.benchmark == "mmlu_redux" and any(
      s in item.meta.get("subject", "") for s in _MMLU_MATH_SUBJECTS):
    return P.ROLE_FIT
  return -P.ROLE_FIT


def count_tokens(text: str) -> int:
  """Approximate BPE token count (~4 characters per token)."""
  return int(math.ceil(len(text) / P.CHARS_PER_TOKEN))


def prompt_tokens(messages: Sequence[dict]) -> int:
  return sum(count_tokens(m["content"]) + P.MESSAGE_OVERHEAD_TOKENS for m in messages) \
      + P.REPLY_PRIMING_TOKENS


def prompt_kind(view: reading.RequestView) -> str:
  """"answer", "reasoning" or "aggregation" (sets reply length and hidden reasoning effort)."""
  if not view.reasons:
    return "answer"
  return "aggregation" if view.candidates else "reasoning"


@dataclasses.dataclass(frozen=True)
class Answer:
  """One answer the model could give: `key` identifies it (option index, MATH normal form, code
  normal form), `text` is how it is written, `correct` whether it is right."""

  key: object
  text: str
  correct: bool
  placed: bool = True  # an answer to this item (params.Aggregation.unplaced_support otherwise)


@dataclasses.dataclass(frozen=True)
class Reply:
  """What the server turns into a chat completion.

  Attributes:
    text: visible message content (before any max_tokens truncation).
    reasoning_tokens: hidden reasoning tokens (reasoning models only).
    item_id: recognised item, or None; for tests and analysis only, never sent.
    correct_drawn: whether the model's own attempt was correct (None for unknown items).
    correct: whether the final answer is correct (None for unknown items).
    adopted: whether the final answer came from the context rather than the own attempt.
    p_correct: the model's own probability of a correct attempt.
    kind: "answer", "reasoning" or "aggregation".
    answer_key: the final answer's identity (option index, MATH normal form, code normal form).
  """

  text: str
  reasoning_tokens: int
  item_id: str | None = None
  correct_drawn: bool | None = None
  correct: bool | None = None
  adopted: bool = False
  p_correct: float | None = None
  kind: str = "answer"
  answer_key: object = None


class BehaviourModel:
  """Loads everything once; `reply(...)` is then pure and does no I/O."""

  def __init__(self, seed: int = 0, profile: str = P.DEFAULT_PROFILE):
    self.seed = int(seed)
    self.profile = profile
    self.aggregation = P.aggregation(profile)
    self.index = reading.ItemIndex()
    fitted = _load_fitted()
    self.theta, self.cot_gap, self.slip = fitted["theta"], fitted["cot_gap"], fitted["slip"]
    self.math_wrong = _load_math_wrong()
    self.mutants, self.variants = _load_programs()
    self.difficulty: dict[tuple[str, str], float] = {
        (it.benchmark, it.id): item_difficulty(it) for b in BENCHMARKS for it in load_items(b)}
    # Makes a reasoning-length `mean` the mean over a benchmark's items (params: "Hidden reasoning").
    self._length_norm = {
        DOMAIN[b]: float(np.mean([math.exp(P.REASONING_DIFFICULTY_SLOPE * self.difficulty[(b, it.id)])
                                  for it in load_items(b)])) * math.exp(P.REASONING_SIGMA ** 2 / 2)
        for b in BENCHMARKS}
    self._strata = {(m, b): _stratified_normals(self.seed, m, b, self.difficulty)
                    for m in MODELS for b in BENCHMARKS}
    for it in load_items("humaneval_plus"):
      if not self.mutants.get(it.id):
        raise SimDataError(f"no HumanEval+ mutant for {it.id}; rebuild with "
                           f"`python -m hieramas_jax.sim.build_mutants`")
    for it in load_items("math"):
      if not self.math_wrong.get(it.id):
        raise SimDataError(f"no MATH near-miss for {it.id}; rebuild with "
                           f"`python -m hieramas_jax.sim.build_math_wrong`")

  # ---- competence ----------------------------------------------------------------------------

  def logit(self, model: str, item: Item, view: reading.RequestView, temperature: float,
            reasons: bool | None = None) -> float:
    """The model's own log-odds of a correct attempt on this request (`reasons` overrides the cue)."""
    reasons = view.reasons if reasons is None else reasons
    return (self.theta[model][item.benchmark] - self.difficulty[(item.benchmark, item.id)]
            + role_fit(view.role, item)
            + (self.cot_gap[model][item.benchmark] if reasons else 0.0)
            - P.temperature_penalty(temperature))

  def slip_rate(self, model: str, item: Item, view: reading.RequestView) -> float:
    """P(a reasoned-out answer is lost, fresh per sample) when nothing asks the model to reason."""
    return 0.0 if view.reasons else self.slip[model][item.benchmark]

  def p_correct(self, model: str, item: Item, view: reading.RequestView,
                temperature: float = 0.2) -> float:
    """P(the own attempt is right): the logit's probability, less slips."""
    return sigmoid(self.logit(model, item, view, temperature)) * (1.0 - self.slip_rate(model, item, view))

  # ---- the reply -----------------------------------------------------------------------------

  def reply(self, model: str, messages: Sequence[dict], temperature: float | None,
            top_p: float | None, sample_index: int) -> Reply:
    """The model's answer to one request. Pure: same inputs, same reply."""
    view = reading.read_request(messages, self.index)
    fingerprint = messages_fingerprint(list(messages))
    temp = P.DEFAULT_TEMPERATURE if temperature is None else float(temperature)
    # Greedy decoding (T = 0) ignores the sample index: every sample is the same reply.
    sample = sample_index if temp > 0 else 0
    # One digest per request: u[0] own correctness, u[1] which answer, u[2] choice among the
    # candidates, u[3] wording, u[4] reasoning length, u[5] slip, u[6] the reader's lapse.
    u = uniforms("sample", self.seed, model, fingerprint, temp, top_p, sample)
    kind = prompt_kind(view)
    if view.recognised is None:
      return self._unknown_reply(model, view, temp, u, kind)
    item = view.recognised.item
    logit = self.logit(model, item, view, temp)
    p_self = self.p_correct(model, item, view, temp)
    r = P.rho(temp)
    zp = self._persistent(model, item)
    # The persistent draw decides the (reasoned) attempt; a slip, fresh per sample, can spoil it.
    own_correct = (phi(math.sqrt(r) * zp[0] + math.sqrt(1.0 - r) * inv_phi(u[0])) < sigmoid(logit)
                   and not u[5] < self.slip_rate(model, item, view))
    u_pick = phi(math.sqrt(r) * zp[1] + math.sqrt(1.0 - r) * inv_phi(u[1]))
    own = self._attempt(model, view.recognised, own_correct, u_pick)
    final = own
    if view.candidates:
      context_tokens = view.context_chars / P.CHARS_PER_TOKEN
      final = self.choose(own, self.candidate_answers(view), logit, context_tokens, u[2], u[6])
    domain = item.domain
    text = render.answer_text(item, final.text, self._prose_tokens(model, domain, kind), final is not own, u[3])
    reasoning = self._reasoning_tokens(model, domain, kind != "answer",
                                       self.difficulty[(item.benchmark, item.id)], inv_phi(u[4]))
    return Reply(text, reasoning, item.id, own_correct, final.correct, final is not own, p_self, kind, final.key)

  # ---- answers -------------------------------------------------------------------------------

  def _attempt(self, model: str, rec: reading.Recognised, correct: bool, u: float) -> Answer:
    """The model's own answer: a right one or a wrong one, picked from the item's pools."""
    item = rec.item
    if item.benchmark == "mmlu_redux":
      gold = LETTERS.index(item.answer)
      if correct:
        return Answer(gold, rec.letter_of(gold), True)
      wrong = [k for k in range(len(LETTERS)) if k != gold]
      k = wrong[self._pick(model, item, "wrong", [1.0] * len(wrong), u)]
      return Answer(k, rec.letter_of(k), False)
    if item.benchmark == "math":
      if correct:
        return Answer(reading.math_key(item.answer), item.answer, True)
      pool = self.math_wrong[item.id]
      text = pool[self._pick(model, item, "wrong", _listed_prior(len(pool)), u)]
      return Answer(reading.math_key(text), text, False)
    pool = self.correct_programs(item) if correct else self.mutants[item.id]
    prior = P.CORRECT_CODE_PRIOR[:len(pool)] if correct else _listed_prior(len(pool))
    code = pool[self._pick(model, item, "right" if correct else "wrong", prior, u)]
    return Answer(reading.code_key(code), code, correct)

  def correct_programs(self, item: Item) -> list[str]:
    return [item.question + item.answer] + list(self.variants.get(item.id, ()))

  def _pick(self, model: str, item: Item, which: str, prior: Sequence[float], u: float) -> int:
    """Index into a pool: prior x exp(shared spread x g + model spread x h), inverted at u."""
    g = normals("pool-shared", self.seed, which, item.benchmark, item.id)
    h = normals("pool-model", self.seed, which, model, item.benchmark, item.id)
    shared = P.ERROR_SHARED_SPREAD[item.benchmark] if which == "wrong" else 0.0
    weights = [w * math.exp(shared * g[k % 8] + P.ERROR_MODEL_SPREAD * h[k % 8])
               for k, w in enumerate(prior)]
    return _invert(weights, u)

  def candidate_answers(self, view: reading.RequestView) -> list[Answer]:
    """The candidates of the prompt as answers this model could give (unreadable ones dropped)."""
    rec = view.recognised
    item = rec.item
    out = []
    for text in view.candidates:
      if item.benchmark == "mmlu_redux":
        k = rec.option_of(text)
        if k is not None:
          out.append(Answer(k, rec.letter_of(k), k == LETTERS.index(item.answer)))
      elif item.benchmark == "math":
        key = reading.math_key(text)
        out.append(Answer(key, text.strip(), key == reading.math_key(item.answer), key in self._placed_keys(item)))
      else:
        key = reading.code_key(text)
        out.append(Answer(key, text, key in self._correct_keys(item), key in self._placed_keys(item)))
    return out

  @functools.lru_cache(maxsize=4096)
  def _correct_keys(self, item: Item) -> frozenset:
    return frozenset(reading.code_key(c) for c in self.correct_programs(item))

  @functools.lru_cache(maxsize=4096)
  def _placed_keys(self, item: Item) -> frozenset:
    """Answers a reader can place as answers to this item: the right ones and the near misses any model
    of the pool gives (MATH's wrong-answer pool, HumanEval+'s mutants). Why: an answer from another
    question (another number, a program for another function) is judged by content, not counted as
    support (issue 28: two foreign proposals were adopted 43% of the time)."""
    if item.benchmark == "math":
      return frozenset([reading.math_key(item.answer)] + [reading.math_key(w) for w in self.math_wrong[item.id]])
    return self._correct_keys(item) | frozenset(reading.code_key(m) for m in self.mutants[item.id])

  def choose(self, own: Answer, candidates: Sequence[Answer], own_logit: float,
             context_tokens: float, u: float, u_lapse: float = 1.0) -> Answer:
    """Luce choice among the distinct answers present (the profile's `Aggregation.luce_weight`), unless
    the reader lapses (`Aggregation.lapse`, decided by `u_lapse`) and keeps its own attempt.

    Ties in weight keep the order of first appearance, the own attempt first.
    """
    agg = self.aggregation
    p_self = 1.0 / (1.0 + math.exp(-own_logit))
    if u_lapse < agg.lapse(p_self):
      return own
    counts: collections.Counter = collections.Counter()
    for a in candidates:
      counts[a.key] += 1.0 if a.placed else agg.unplaced_support
    first: dict[object, Answer] = {own.key: own}
    for a in candidates:
      first.setdefault(a.key, a)
    kappa = agg.recognition(own_logit, context_tokens)
    weights = [agg.luce_weight(counts.get(key, 0), key == own.key, ans.correct, kappa, p_self)
               for key, ans in first.items()]
    return list(first.values())[_invert(weights, u)]

  @functools.lru_cache(maxsize=1 << 16)
  def _persistent(self, model: str, item: Item) -> tuple[float, float]:
    """z_persist(model, item) for correctness and for the choice of answer."""
    z = normals("persist", self.seed, model, item.benchmark, item.id)
    return self._strata[(model, item.benchmark)][item.id], z[1]

  # ---- unknown questions ---------------------------------------------------------------------

  def _unknown_reply(self, model: str, view: reading.RequestView, temp: float, u: list[float],
                     kind: str) -> Reply:
    """A fluent answer in the format asked for, to a question the sim does not know.

    The sim knows no gold answer here, so correctness can only be chance. What it keeps is the
    structure real models show: with the model's fallback competence (its mean Base accuracy on
    the benchmark of that format) it gives the "consensus" answer every model tends to (a hash of
    the question), otherwise another one; so strong models agree with each other more than weak
    ones, at whatever rate of truth.
    """
    fmt = view.answer_format
    key = reading.normalise(view.query_text)
    world = uniforms("unknown-world", self.seed, key)
    benchmark = {"mcq": "mmlu_redux", "math": "math", "code": "humaneval_plus"}.get(fmt)
    domain = DOMAIN[benchmark] if benchmark else "generic"
    high = kind != "answer"
    reasoning = self._reasoning_tokens(model, domain, high, 0.0, inv_phi(u[4]))
    if benchmark is None:
      text = render.generic_answer(view.query_text or "the question", self._prose_tokens(model, "generic", kind), u[3])
      return Reply(text, reasoning, kind=kind)
    competence = TARGETS[model][benchmark].accuracy
    r = P.rho(temp)
    z_persist = normals("unknown-persist", self.seed, model, key)[0]
    agrees = phi(math.sqrt(r) * z_persist + math.sqrt(1.0 - r) * inv_phi(u[0])) < competence
    choice = 0 if agrees else 1 + int(u[1] * 3)
    if fmt == "mcq":
      letters = sorted(reading.read_options(view.query_text)) or list(LETTERS)
      consensus = int(world[0] * len(letters))
      answer = letters[(consensus + choice) % len(letters)]
    elif fmt == "math":
      numbers = [int(n) for n in re.findall(r"\d+", view.query_text)[:6]] or [1]
      value = (numbers[int(world[0] * len(numbers))] * (1 + int(world[1] * 5)) + int(world[2] * 10))
      answer = str(value + (0 if agrees else (choice if world[3] < 0.5 else -choice)))
    else:
      entry = view.code_entry or "solution"
      header = _signature_line(view.query_text, entry)
      body = ("    return None" if choice == 0 and world[0] < 0.5 else
              "    result = None\n    return result")
      answer = f"{header}\n{body}\n"
    text = render.format_answer(fmt, answer, self._prose_tokens(model, domain, kind), u[3])
    return Reply(text, reasoning, kind=kind)

  # ---- length --------------------------------------------------------------------------------

  def _prose_tokens(self, model: str, domain: str, kind: str) -> int:
    return int(round(P.VISIBLE_TOKENS[domain][kind] * P.BEHAVIOUR[model].verbosity))

  def _reasoning_tokens(self, model: str, domain: str, high: bool, b: float, z: float) -> int:
    mean = P.BEHAVIOUR[model].reasoning_mean(domain, high)
    if mean <= 0:
      return 0
    norm = self._length_norm.get(domain, math.exp(P.REASONING_SIGMA ** 2 / 2))
    return int(round(mean / norm * math.exp(P.REASONING_DIFFICULTY_SLOPE * b + P.REASONING_SIGMA * z)))


def _signature_line(prompt: str, entry: str) -> str:
  for line in prompt.splitlines():
    if line.lstrip().startswith(f"def {entry}"):
      return line.rstrip()
  return f"def {entry}(*args):"


def _listed_prior(n: int) -> list[float]:
  """Pools built most plausible first: weight 1 / (k + 1)."""
  return [1.0 / (k + 1) for k in range(n)]


def _invert(weights: Sequence[float], u: float) -> int:
  """The index whose cumulative normalised weight first exceeds u."""
  total = sum(weights)
  acc = 0.0
  for k, w in enumerate(weights):
    acc += w / total
    if u < acc:
      return k
  return len(weights) - 1


def _stratified_normals(seed: int, model: str, benchmark: str,
                        difficulty: Mapping[tuple[str, str], float]) -> dict[str, float]:
  """z_persist(model, item) for correctness, stratified within blocks of similar difficulty."""
  items = sorted(load_items(benchmark), key=lambda it: (difficulty[(benchmark, it.id)], it.id))
  rng = np.random.default_rng(seed_int("persist-strata", seed, model, benchmark))
  out: dict[str, float] = {}
  for start in range(0, len(items), P.STRATUM_SIZE):
    block = items[start:start + P.STRATUM_SIZE]
    k = len(block)
    grid = (rng.permutation(k) + rng.random(k)) / k
    for it, u in zip(block, grid):
      out[it.id] = inv_phi(min(max(float(u), 1e-12), 1 - 1e-12))
  return out


# ---- artefacts ---------------------------------------------------------------------------------


def _load_json(path, what: str, command: str):
  if not path.exists():
    raise SimDataError(f"{what} missing at {path}; build it with `{command}`")
  opener = gzip.open if path.suffix == ".gz" else open
  with opener(path, "rt", encoding="utf-8") as f:
    return json.load(f)


def _load_fitted() -> dict[str, dict[str, dict[str, float]]]:
  data = _load_json(THETA_PATH, "fitted competences", "python -m hieramas_jax.sim.fit_theta")
  for key in ("theta", "cot_gap", "slip"):
    table = data.get(key, {})
    missing = [m for m in MODELS if m not in table or set(table[m]) != set(BENCHMARKS)]
    if missing:
      raise SimDataError(f"{THETA_PATH} lacks {key} for {missing}; rerun `python -m hieramas_jax.sim.fit_theta`")
  if data.get("difficulty_seed") != P.DIFFICULTY_SEED:
    raise SimDataError(f"{THETA_PATH} was fitted for another difficulty seed; rerun the fit")
  return data


def _load_theta() -> dict[str, dict[str, float]]:
  return _load_fitted()["theta"]


def _load_math_wrong() -> dict[str, list[str]]:
  data = _load_json(MATH_WRONG_PATH, "MATH near-misses", "python -m hieramas_jax.sim.build_math_wrong")
  return data["wrong"]


def _load_programs() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
  data = _load_json(MUTANTS_PATH, "HumanEval+ mutants", "python -m hieramas_jax.sim.build_mutants")
  return data["mutants"], data.get("variants", {})


def _load_mutants() -> dict[str, list[str]]:
  return _load_programs()[0]


def theta_table() -> Mapping[str, Mapping[str, float]]:
  return _load_theta()
