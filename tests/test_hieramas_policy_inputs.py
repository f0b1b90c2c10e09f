"""HieraMAS's selector options: the reference selector's input texts (`policy_inputs`) and `exclude_llms`.

Expected strings are written out here from the reference files (tianyao-aka/HieraMAS at cacb988:
model/embeddings.py `get_task_role_embedding`, prompt/role_descriptions.py `ROLE_META_DESC`), not read from the
module under test, so a changed text fails here.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from hieramas_jax.benchmarks.data import Item
from hieramas_jax.experiment.cli import run_or_exit
from hieramas_jax.learn import policy as policy_lib
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.methods.hieramas import policy_inputs, training
from hieramas_jax.methods.hieramas.config import HieraMASConfig, HieraMASConfigError
from hieramas_jax.methods.hieramas.method import HieraMAS
from hieramas_jax.methods.hieramas.rollout import Setup

MATH = Item(id="p/1", benchmark="math", question="What is 2+3?", answer="5")
MMLU = Item(id="p/2", benchmark="mmlu_redux", question="Pick one.\nA. x\nB. y\nC. z\nD. w", answer="B")
ITEMS = [MATH, Item(id="p/3", benchmark="math", question="Solve x^2 = 9 for x > 0.", answer="3"),
         Item(id="p/4", benchmark="math", question="How many primes are below 20?", answer="8")]

MATH_SOLVER_TEXT = (
    "Task: What is 2+3?\n\nRole: Math Solver\nMath Solver role specialized in executing mathematical computations.\n"
    "Responsibilities: Solve equations, perform calculations, verify numerical results.\n"
    "Strengths: Accurate computation, step-by-step solutions, arithmetic precision.\n"
    "Approach: Methodical calculation with verification at each step.\n"
    "Best for: Carrying out calculations and deriving numerical answers.")
KNOWLEGABLE_EXPERT_TEXT = (
    "Task: Pick one.\nA. x\nB. y\nC. z\nD. w\n\nRole: Knowlegable Expert\n"
    "Knowledgeable Expert role specialized in domain knowledge and research.\n"
    "Responsibilities: Provide domain expertise, search for relevant information.\n"
    "Strengths: Deep domain knowledge, information retrieval, expert insights.\n"
    "Approach: Knowledge-driven problem solving with expert references.\n"
    "Best for: Problems requiring specialized domain knowledge.")
DEFAULT_TAIL = (
    "General problem-solving agent role.\nResponsibilities: Analyze problems and provide solutions.\n"
    "Strengths: General reasoning and problem-solving capabilities.\nApproach: Systematic analysis and solution "
    "generation.\nBest for: General tasks without specialized requirements.")


@pytest.fixture(scope="module")
def setup():
  return Setup.make("math", get_pool("gpt-5-mini"), 2)


@pytest.fixture(scope="module")
def suite_emb(setup):
  return training.Embeddings(setup, "all-MiniLM-L6-v2")


def test_reference_texts_equal_the_references_strings():
  text = policy_inputs.TEXTS["reference"]
  assert text(MATH.question, "Math Solver", "the suite's description") == MATH_SOLVER_TEXT
  assert text(MMLU.question, "Knowlegable Expert", "") == KNOWLEGABLE_EXPERT_TEXT
  # The task is cut at 1,500 characters; a role the table lacks reads the 'default' entry.
  assert text("y" * 2000, "Juggler", "") == "Task: " + "y" * 1500 + "\n\nRole: Juggler\n" + DEFAULT_TAIL
  # Every role of every benchmark has its own entry (none falls back to the default).
  for benchmark in ("math", "mmlu_redux", "humaneval_plus"):
    for role in Setup.make(benchmark, get_pool("gpt-5-mini"), 1).roles:
      assert policy_inputs.role_description(role).startswith(role.replace("Knowlegable", "Knowledgeable")
                                                             .replace("Doctor", "Medical Doctor"))


def test_reference_inputs_embed_the_reference_texts_and_change_the_logits(setup, suite_emb):
  ref = training.Embeddings(setup, "all-MiniLM-L6-v2", policy_inputs="reference")
  texts = [policy_inputs.reference_text(it.question, r, "") for it in ITEMS for r in setup.roles]
  np.testing.assert_array_equal(ref.query_role(ITEMS),
                                ref.encoder.encode(texts).reshape(len(ITEMS), setup.num_roles, -1))
  assert ref.query_role(ITEMS)[0, 1] == pytest.approx(ref.encoder.encode([MATH_SOLVER_TEXT])[0])
  net = policy_lib.PairMLPPolicy(hidden=32)
  inputs = ref.item_inputs(ITEMS)
  params = policy_lib.init_params(jax.random.key(0), inputs, net)
  suite_inputs = suite_emb.item_inputs(ITEMS)
  # The same parameters (the inputs' shapes are the suite's), other texts, other logits.
  assert jax.tree.structure(params) == jax.tree.structure(policy_lib.init_params(jax.random.key(0), suite_inputs, net))
  a = np.asarray(policy_lib.logits(params, inputs, net=net))
  b = np.asarray(policy_lib.logits(params, suite_inputs, net=net))
  assert a.shape == b.shape and np.abs(a - b).max() > 1e-4


def test_the_default_inputs_are_the_suites_unchanged(setup, suite_emb):
  """Default config: the suite's text, no exclusion mask in the inputs, no parameter for either, nothing recorded."""
  cfg = HieraMASConfig(benchmark="math")
  assert cfg.policy_inputs == "suite" and cfg.exclude_llms == "" and cfg.excluded_models == ()
  described = HieraMAS(cfg).describe()
  assert "policy_inputs" not in described and "exclude_llms" not in described
  changed = HieraMAS(dataclasses.replace(cfg, policy_inputs="reference", exclude_llms="deepseek-r1-14b")).describe()
  assert changed["policy_inputs"] == "reference" and changed["exclude_llms"] == "deepseek-r1-14b"
  # The learning evidence's maximum entropy counts the choices that can have weight: 8 models + skip, less one.
  assert HieraMAS(cfg).num_choices == 9 and HieraMAS(dataclasses.replace(cfg, exclude_llms="llama-8b")).num_choices == 8
  texts = [policy_lib.query_role_text(it.question, r, d) for it in ITEMS for r, d in zip(setup.roles,
                                                                                         setup.descriptions)]
  np.testing.assert_array_equal(suite_emb.query_role(ITEMS),
                                suite_emb.encoder.encode(texts).reshape(len(ITEMS), setup.num_roles, -1))
  inputs = suite_emb.item_inputs(ITEMS)
  assert inputs.excluded is None and suite_emb.excluded is None
  for net in (policy_lib.PairMLPPolicy(hidden=32), policy_lib.LLMSelectionPolicy(hidden=32)):
    params = policy_lib.init_params(jax.random.key(1), inputs, net)
    nothing = inputs._replace(excluded=np.zeros(len(setup.models) + 1, bool))
    again = policy_lib.init_params(jax.random.key(1), nothing, net)
    assert jax.tree.structure(params) == jax.tree.structure(again)
    for x, y in zip(jax.tree.leaves(params), jax.tree.leaves(again)):
      np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    np.testing.assert_array_equal(np.asarray(policy_lib.logits(params, inputs, net=net)),
                                  np.asarray(policy_lib.logits(params, nothing, net=net)))


def _favoured(setup, suite_emb, net, params):
  """The model the unmasked greedy policy chooses most often."""
  greedy = np.asarray(policy_lib.greedy_choices(params, suite_emb.item_inputs(ITEMS), net=net))
  return int(np.argmax(np.bincount(greedy.ravel(), minlength=len(setup.models) + 1)[:len(setup.models)]))


def _rotations(params, inputs, net):
  logits = np.asarray(policy_lib.logits(params, inputs, net=net))
  return np.stack([policy_lib.rotation_choices(q, np.random.default_rng(0), 2, top_n=2) for q in logits])


@pytest.mark.parametrize("head", ["pair_mlp", "dot"])
def test_an_excluded_model_has_probability_zero_and_is_never_chosen(setup, suite_emb, head):
  net = policy_lib.HEADS[head](hidden=32)
  params = policy_lib.init_params(jax.random.key(2), suite_emb.item_inputs(ITEMS), net)
  # Exclude the model the greedy policy chooses most, so that the rules would otherwise pick it.
  name = setup.models[_favoured(setup, suite_emb, net, params)]
  emb = training.Embeddings(setup, "all-MiniLM-L6-v2", excluded_models=(name,))
  index = setup.models.index(name)
  plain, masked = suite_emb.item_inputs(ITEMS), emb.item_inputs(ITEMS)
  assert masked.excluded.tolist() == [m == name for m in setup.models] + [False]
  for tau in (10.0, 1.0, 0.8):
    probs = np.asarray(policy_lib.probabilities(params, masked, tau, net=net))
    assert np.all(probs[..., index] == 0.0) and np.allclose(probs.sum(-1), 1.0)
    assert np.all(np.asarray(policy_lib.probabilities(params, plain, tau, net=net))[..., index] > 0)
  keys = jax.random.split(jax.random.key(3), 200)
  drawn = np.stack([np.asarray(policy_lib.sample_choices(params, masked, k, 10.0, net=net)) for k in keys])
  drawn_plain = np.stack([np.asarray(policy_lib.sample_choices(params, plain, k, 10.0, net=net)) for k in keys])
  assert not np.any(drawn == index) and np.any(drawn_plain == index)
  assert not np.any(np.asarray(policy_lib.greedy_choices(params, masked, net=net)) == index)
  assert np.any(np.asarray(policy_lib.greedy_choices(params, plain, net=net)) == index)
  assert not np.any(_rotations(params, masked, net) == index) and np.any(_rotations(params, plain, net) == index)
  # The entropy and log-probabilities the stage-1 loss uses stay finite.
  parts = policy_lib.log_prob_parts(params, masked, jax.numpy.asarray(drawn[0]), 0.8, net=net)
  assert all(np.all(np.isfinite(np.asarray(x))) for x in parts)


def test_exclude_llms_names_are_checked_and_kept_in_pool_order(capsys, monkeypatch):
  cfg = HieraMASConfig(benchmark="math", exclude_llms=" llama-8b, deepseek-r1-14b,llama-8b")
  assert cfg.exclude_llms == "deepseek-r1-14b,llama-8b" and cfg.excluded_models == ("deepseek-r1-14b", "llama-8b")
  with pytest.raises(HieraMASConfigError, match="unknown model 'deepseek-r1-14'"):
    HieraMASConfig(benchmark="math", exclude_llms="deepseek-r1-14")
  with pytest.raises(HieraMASConfigError, match="'gpt-5-nano' is not in the qwen3-80b pool"):
    HieraMASConfig(benchmark="math", pool="qwen3-80b", exclude_llms="gpt-5-nano")
  with pytest.raises(HieraMASConfigError, match="leaves 1 of the pool's 6 models"):
    HieraMASConfig(benchmark="math", pool="qwen3-80b", exclude_llms="qwen3-8b,deepseek-v3,deepseek-r1-14b,llama-8b,"
                                                                     "gemma-3-27b")
  monkeypatch.setattr("logging.shutdown", lambda: None)  # run_or_exit's own would close pytest's log handlers
  with pytest.raises(SystemExit) as caught:
    run_or_exit(lambda: HieraMASConfig(benchmark="math", exclude_llms="gpt-9"))
  err = capsys.readouterr().err
  assert caught.value.code == 2 and err.count("\n") == 1 and err.startswith("error: exclude_llms: unknown model")
