"""The constant-sensitivity harness (experiment/constant_sensitivity.py).

Why: it replaces the sim's constants in the process that may go on serving or measuring the sim; a value or a cached
reading that outlived its block would change every later answer without changing the fingerprint. And a harness that
reports zero everywhere would pass a restore test: one constant whose effect is known must move its quantity.
"""

from __future__ import annotations

import pytest

from hieramas_jax.benchmarks.data import load_items
from hieramas_jax.experiment import constant_sensitivity as C
from hieramas_jax.experiment.backend import sim_fingerprint
from hieramas_jax.mas import roles
from hieramas_jax.sim import intent, reading
from hieramas_jax.sim import params as P
from hieramas_jax.sim.model import BehaviourModel

SELECTED = ("ROLE_FIT", "intent.MIN_SIMILARITY", "reading.KEY_WORDS", "Aggregation.unplaced_support",
            "LATENT_DIFFICULTY_SIGMA")
TERSE = "Show your work."  # reads as a request to reason at the served MIN_SIMILARITY (0.50 >= 0.45), not at 0.55


def _constants() -> dict[str, object]:
  """Every module-level constant the harness may replace, by identity."""
  return {f"{m.__name__}.{k}": v for m in (P, reading, intent) for k, v in vars(m).items() if k.lstrip("_").isupper()}


def _requests():
  math_item, mmlu_item = load_items("math")[3], load_items("mmlu_redux")[7]
  proposals = ["The answer is \\boxed{7}.", "I get \\boxed{7}.", f"So \\boxed{{{math_item.answer}}}."]
  return [roles.single_model_messages(math_item, cot=True), roles.single_model_messages(mmlu_item, cot=False),
          roles.agent_messages(mmlu_item, roles.roles_for("mmlu_redux")[0]),
          roles.synthesizer_messages(math_item, None, proposals),
          [{"role": "user", "content": f"{math_item.question}\n\n{TERSE}"}]]


def _answers(sim: BehaviourModel) -> list[tuple]:
  out = []
  for messages in _requests():
    for model in ("gpt-5-mini", "llama-8b"):
      r = sim.reply(model, messages, 0.7, None, 1)
      out.append((r.text, r.reasoning_tokens, r.correct, r.adopted, r.p_correct, r.kind))
  return out


@pytest.fixture(scope="module")
def record():
  """The harness on a few items (the committed table runs 300 per benchmark), with the sim's state around it."""
  saved = C.N_ITEMS, C.N_FOREIGN
  C.N_ITEMS, C.N_FOREIGN = 12, 6
  try:
    sim = BehaviourModel(0)
    before = {"constants": _constants(), "answers": _answers(sim), "fingerprint": sim_fingerprint(),
              "terse": intent.asks_to_reason(TERSE)}
    rec = C.constant_sensitivity(selected=SELECTED)
    after = {"constants": _constants(), "answers": _answers(sim), "fresh": _answers(BehaviourModel(0)),
             "fingerprint": sim_fingerprint(), "terse": intent.asks_to_reason(TERSE)}
  finally:
    C.N_ITEMS, C.N_FOREIGN = saved
  return rec, before, after


def test_the_harness_restores_every_constant_and_the_sims_answers(record):
  rec, before, after = record
  assert [r["name"] for r in rec["rows"]] == [p.name for p in C.perturbations() if p.name in SELECTED]
  assert after["constants"].keys() == before["constants"].keys()
  moved = [k for k, v in before["constants"].items() if after["constants"][k] is not v]
  assert not moved, moved
  assert after["answers"] == before["answers"]  # the sim built before the harness ran
  assert after["fresh"] == before["answers"]  # and one built after it
  assert before["terse"] and after["terse"]
  assert after["fingerprint"] == before["fingerprint"]


def test_a_reading_constant_is_read_inside_its_block_and_not_after():
  assert intent.asks_to_reason(TERSE)  # cached under the served threshold
  with C.replaced(intent, "MIN_SIMILARITY", 0.55, reads=True):
    assert not intent.asks_to_reason(TERSE)  # the cache was cleared: the alternative is what is read
  assert intent.asks_to_reason(TERSE)  # and cleared again: the alternative's reading does not leak


def test_role_fit_moves_the_role_agent_and_nothing_without_a_role(record):
  rec, _, _ = record
  row = next(r for r in rec["rows"] if r["name"] == "ROLE_FIT")
  low, high = row["changes"]["low"], row["changes"]["high"]  # ROLE_FIT 0 and 0.4 against 0.2
  assert low["role_agent"]["delta"] < -0.3 and high["role_agent"]["delta"] > 0.3, (low, high)
  for key in ("base/gpt-5-mini/math", "cot/llama-8b/mmlu_redux", "tokens", "r1_cut"):
    assert low[key]["delta"] == 0 and high[key]["delta"] == 0, key


def test_a_difficulty_spread_is_measured_with_theta_refitted(record):
  """Refitted, gpt-5-mini's Base MMLU-Redux target holds over all items, so on the sample a doubled spread moves it
  by about 2 points (12 items); held at the served theta it would fall by about 8 (measured when this was written)."""
  rec, _, _ = record
  row = next(r for r in rec["rows"] if r["name"] == "LATENT_DIFFICULTY_SIGMA")
  assert row["refit_theta"]
  assert abs(row["changes"]["high"]["base/gpt-5-mini/mmlu_redux"]["delta"]) < 5.0, row["changes"]["high"]


def test_the_table_shows_every_row_and_marks_noise(record):
  from hieramas_jax.report.calibration import constant_sensitivity_markdown  # pylint: disable=import-outside-toplevel
  rec, _, _ = record
  text = "\n".join(constant_sensitivity_markdown(rec))
  for name in SELECTED:
    assert f"| {name} |" in text
  role = next(line for line in text.splitlines() if line.startswith("| ROLE_FIT |"))
  assert role.count(" / ") >= len(C.QUANTITIES)  # a low and a high change in every quantity's cell
  assert "- role agent gpt-5-mini (both): " in text and "Not perturbed:" in text


def test_the_calibration_computes_it_outside_its_event_loop(tmp_path):
  """The harness runs the suite's methods under asyncio.run; the calibration is a coroutine (it failed so once)."""
  import asyncio  # pylint: disable=import-outside-toplevel
  import types  # pylint: disable=import-outside-toplevel

  from hieramas_jax.experiment.backend import open_backend  # pylint: disable=import-outside-toplevel
  from hieramas_jax.experiment.calibration import run_calibration  # pylint: disable=import-outside-toplevel

  def stub():
    asyncio.run(asyncio.sleep(0))  # what `measure` does: raises inside a running loop
    return {"rows": []}
  flags = types.SimpleNamespace(backend="sim", base_url=None, api_key_env=None, model_map=[], max_concurrency=4,
                                request_timeout_s=30.0, max_retries=1)

  async def go():
    async with open_backend(flags, seed=0, cache_root=tmp_path / "cache") as backend:
      return await run_calibration({0: backend}, models=["llama-8b"], benchmarks=["math"], n_items=2, collab_items=1,
                                   code_seeds=[0], seed=0, run_root=tmp_path / "runs", flags={}, sections=(),
                                   progress=False, constants=stub)
  assert asyncio.run(go())["constant_sensitivity"] == {"rows": []}
