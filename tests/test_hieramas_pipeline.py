"""HieraMAS end to end on the simulated pool over real HTTP: encoder -> stage 1 -> stage 2 -> inference.

One tiny configuration (MMLU-Redux, a handful of queries, a few steps, K = 8) is trained once through the
runner (`experiment.runner`, the path every method takes) as the reference; other tests compare against
it: an independent rerun with the same seed (no response cache, so every call really goes to the sim
again), a run killed during stage 1 and resumed, the stage-1 checkpoint that stage 2 loads, and the two
inference ablations.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import pathlib
import shutil

import numpy as np
import pytest

from hieramas_jax.benchmarks.splits import load_split
from hieramas_jax.experiment.backend import Backend
from hieramas_jax.experiment.runner import cell_dir, run_table, table_root
from hieramas_jax.experiment.spec import Cell, TableSpec
from hieramas_jax.learn import gcn as gcn_lib
from hieramas_jax.learn import stage1 as stage1_lib
from hieramas_jax.learn import stage2 as stage2_lib
from hieramas_jax.learn.checkpoint import params_sha256
from hieramas_jax.llm.client import LLMClient
from hieramas_jax.llm.endpoint import sim_endpoint
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.methods.api import RunContext
from hieramas_jax.methods.hieramas import training
from hieramas_jax.methods.hieramas.config import HieraMASConfig
from hieramas_jax.methods.hieramas.rollout import Setup
from hieramas_jax.methods.registry import make_method
from hieramas_jax.report import learning
from hieramas_jax.report.hieramas import chosen, read_items
from hieramas_jax.sim.server import SimConfig, start_sim_in_thread

pytestmark = pytest.mark.slow

# MMLU-Redux: graded by letter extraction, instantly (MATH's symbolic grading is serialised in one worker).
TRAIN, VAL, TEST = (load_split("mmlu_redux", p)[:n] for p, n in (("train", 6), ("val", 2), ("test", 3)))
R = 8
TINY = HieraMASConfig(benchmark="mmlu_redux", pool="gpt-5-mini", stage1_steps=3, stage1_batch=2, stage1_val_every=2,
                      stage1_checkpoint_every=1, k_pool=8, stage2_graphs=3, stage2_epochs=2, stage2_batch=4,
                      stage2_patience=2, max_queries=16, stage2_drop_ties=False)  # 6 queries: keep all for stage 2
CELL_FIELDS = ("benchmark", "pool", "seed")


class Killed(Exception):
  """Stands for a SIGKILL in the middle of stage 1."""


class KillAt:
  """A metric writer that 'kills' the run when stage 1 logs step `step` (after that update, before its save)."""

  def __init__(self, step):
    self.step = step

  def write_scalars(self, step, scalars):
    if step == self.step and "stage1/loss" in scalars:
      raise Killed(f"killed at stage-1 step {step}")


@pytest.fixture(scope="module")
def sim():
  handle = start_sim_in_thread(SimConfig(seed=0))
  yield handle
  handle.close()


def _spec(cfg=TINY, tag="", load_from=None):
  return TableSpec(methods=("hieramas",), benchmarks=(cfg.benchmark,), pools=(cfg.pool,), setting="main",
                   seeds=(cfg.seed,), train_limit={cfg.benchmark: len(TRAIN)}, val_limit=len(VAL),
                   test_limit=len(TEST),
                   method_options={"hieramas": {k: v for k, v in cfg.to_json().items() if k not in CELL_FIELDS}},
                   tag=tag, load_from=load_from or {})


async def _pipeline(sim, run_root, cfg=TINY, **spec_kwargs):
  endpoint = sim_endpoint(sim.base_url)
  async with LLMClient(endpoint) as client:  # no response cache: every call reaches the sim
    backend = Backend(client, endpoint, None)
    table = await run_table(_spec(cfg, **spec_kwargs), {cfg.seed: backend}, run_root=run_root, flags={"test": True},
                            progress=False)
  (cell,) = table["cells"].values()
  return cell


def _run_dir(sim, run_root, tag="") -> pathlib.Path:
  root = table_root(run_root, sim_endpoint(sim.base_url).name)
  return cell_dir(root, Cell("hieramas", TINY.benchmark, TINY.pool, "main", TINY.seed, tag))


def _outcome(run_dir: pathlib.Path):
  """Everything a run decides: best checkpoint, stage-2 labels, chosen graphs and LLMs, scores."""
  state = run_dir / "state"
  best = json.loads((state / "checkpoints/stage1/best.json").read_text())
  stage2 = json.loads((state / "checkpoints/stage2/done.json").read_text())
  data = np.load(state / "stage2_data.npz")
  records = read_items(run_dir)
  scores = [r["trace"]["graph_score"] for r in records]
  return (best, stage2["params_sha256"], data["labels"].tolist(), data["adjacency"].tolist(),
          sorted(json.dumps(c, sort_keys=True) for c in chosen(records)), sorted(scores))


@pytest.fixture(scope="module")
def reference(sim, tmp_path_factory):
  root = tmp_path_factory.mktemp("hieramas-ref")
  cell = asyncio.run(_pipeline(sim, root))
  return root, cell


def test_tiny_config_runs_encoder_stage1_stage2_inference_end_to_end(reference, sim):
  root, cell = reference
  run_dir = _run_dir(sim, root)
  assert cell["n"] == len(TEST) and 0.0 <= cell["accuracy"] <= 100.0 and cell["cost_usd"] > 0
  assert cell["sizes"] == {"train": len(TRAIN), "val": len(VAL), "test": len(TEST)}
  assert cell["fit"]["stage1_best"]["step"] in (2, 3)
  assert cell["fit"]["stage2"]["queries"] == len(TRAIN) and cell["fit"]["stage2"]["graphs_per_query"] == 3
  # Training cost: every stage-1, validation and stage-2 rollout's calls, separate from the test queries'.
  training_cost = cell["training"]["cost_usd"]
  assert training_cost > 0 and cell["training"]["calls"] > cell["n_calls"]
  for name in ("config.json", "metrics.jsonl", "items.jsonl", "traces.jsonl", "summary.json", "fit.json"):
    assert (run_dir / name).exists(), name
  metrics = [json.loads(l) for l in (run_dir / "metrics.jsonl").read_text().splitlines()]
  assert {m["step"] for m in metrics if "stage1/loss" in m} == {1, 2, 3}
  assert any("stage1/val_accuracy" in m for m in metrics) and any("stage2/train_loss" in m for m in metrics)
  # The learning evidence: drift per step (also in the metric curves), paired validation outcomes, the classifier's.
  assert {m["step"] for m in metrics if "stage1/val_kl_from_init" in m} == {0, 1, 2, 3}
  ev = cell["fit"]["evidence"]
  assert [row[0] for row in ev["stage1"]["curve"]] == [0, 1, 2, 3] and ev["stage1"]["curve"][0][2] == 0.0
  assert len(ev["stage1"]["untrained"]["solved"]) == len(VAL) and ev["stage1"]["final_step"] == 3
  assert ev["stage2"]["queries"] >= 1 and len(ev["stage2"]["label"]) == 3 * ev["stage2"]["queries"]
  verdicts = learning.cell_verdicts(cell["fit"], "tiny")
  assert {v["verdict"] for v in verdicts.values()} <= {learning.LEARNED, learning.NOT_LEARNED}
  records = read_items(run_dir)
  for c in chosen(records):
    assert 0 <= c["graph_index"] < TINY.num_candidates and len(c["choices"]) == R
  # Every position of every role was chosen once per test query.
  from hieramas_jax.report.hieramas import preferences  # pylint: disable=import-outside-toplevel
  prefs = preferences(records, Setup.make("mmlu_redux", get_pool("gpt-5-mini"), 2).roles)
  assert sum(prefs["synthesizer"].values()) == len(TEST) * R and sum(prefs["proposer"].values()) == len(TEST) * 2 * R
  # The rotation never proposes skip, and drops at most 2 roles on MMLU-Redux.
  assert prefs["proposer"].get("skip", 0) == 0 and prefs["synthesizer"].get("skip", 0) <= 2 * len(TEST)
  # Stage-2 labels come from stage 1's system reward: the decision node's cost (reference).
  with np.load(run_dir / "state" / training.STAGE2_DATA_FILE) as data:
    hand = np.where(data["solved"], np.maximum(np.exp(-300 * data["decision_cost"]), 0.5),
                    np.maximum(-np.exp(300 * data["decision_cost"]), -2.5))
    np.testing.assert_allclose(data["reward"], hand, rtol=1e-5)
    np.testing.assert_array_equal(data["labels"], stage2_lib.contrastive_labels(hand, top_k=2))
    assert (data["decision_cost"] < data["cost"]).all() and data["choices"].shape[-1] == TINY.stage1_proposers + 1


def test_inference_runs_the_argmax_of_all_k_candidates_scored_at_once(reference, sim):
  root, _ = reference
  method = make_method("hieramas", config=TINY)
  method.load(_run_dir(sim, root) / "state")
  emb = method.embeddings
  picked = {c["item_id"]: c for c in chosen(read_items(_run_dir(sim, root)))}
  method.choose(TEST[0])
  compiled = (stage1_lib.greedy._cache_size(), gcn_lib.score_candidates._cache_size())
  chosen_now = [method.choose(item) for item in TEST]
  # Fixed shapes per query: new queries and their new candidates never recompile the policy or the scorer.
  assert (stage1_lib.greedy._cache_size(), gcn_lib.score_candidates._cache_size()) == compiled
  for item, (_, method_scores, pool) in zip(TEST, chosen_now):
    # The query's own K candidates (the reference draws them per query), the same on every call.
    np.testing.assert_array_equal(pool.adjacency, method.candidates(item).adjacency)
    assert pool.num_graphs == TINY.num_candidates
    # Scoring graph by graph gives the batched scores; masked duplicates score -inf.
    for k in np.flatnonzero(pool.graph_mask):
      one = gcn_lib.score_candidates(method.scorer_params, emb.queries([item]), emb.role_emb,
                                     pool.adjacency[k:k + 1], pool.node_mask[k:k + 1], net=method._scorer)
      np.testing.assert_allclose(np.asarray(one)[0, 0], method_scores[k], rtol=1e-5, atol=1e-5)
    assert np.isneginf(method_scores[~pool.graph_mask]).all()
    # The graph that ran is the argmax, and the record holds that candidate's edges.
    g = int(np.argmax(method_scores))
    assert picked[item.id]["graph_index"] == g
    assert picked[item.id]["graph_edges"] == [[int(i), int(j)] for i, j in zip(*np.nonzero(pool.adjacency[g]))]


def test_same_seed_gives_the_same_configurations_graphs_and_scores(reference, sim, tmp_path):
  root, cell = reference
  again = asyncio.run(_pipeline(sim, tmp_path))
  assert _outcome(_run_dir(sim, tmp_path)) == _outcome(_run_dir(sim, root))
  assert again["training"]["cost_usd"] == pytest.approx(cell["training"]["cost_usd"])
  assert again["outcomes"] == cell["outcomes"]


def test_a_run_killed_during_stage1_resumes_to_the_same_final_result(reference, sim, tmp_path):
  root, _ = reference
  run_dir = _run_dir(sim, tmp_path)

  async def killed():
    endpoint = sim_endpoint(sim.base_url)
    async with LLMClient(endpoint) as client:
      ctx = RunContext(client, get_pool(TINY.pool), TINY.seed, state_dir=run_dir / "state", writer=KillAt(2))
      await make_method("hieramas", config=TINY).fit(TRAIN, VAL, ctx)

  with pytest.raises(Killed):
    asyncio.run(killed())
  assert not (run_dir / "state/checkpoints/stage1/best.json").exists()  # killed before the first validation
  asyncio.run(_pipeline(sim, tmp_path))
  metrics = [json.loads(l) for l in (run_dir / "metrics.jsonl").read_text().splitlines()]
  assert [m["step"] for m in metrics if "stage1/loss" in m] == [2, 3]  # resumed after step 1's checkpoint
  assert _outcome(run_dir) == _outcome(_run_dir(sim, root))


def test_stage2_loads_the_best_stage1_checkpoint_and_refuses_a_wrong_one(reference, sim, tmp_path):
  root, _ = reference
  cfg = TINY
  state_dir = _run_dir(sim, root) / "state"
  method = make_method("hieramas", config=cfg)
  emb = method.embeddings
  best = json.loads((state_dir / "checkpoints/stage1/best.json").read_text())
  state = training.load_best_policy(cfg, emb, state_dir)
  assert params_sha256(state.params) == best["params_sha256"]
  assert params_sha256(state.params) != params_sha256(training.fresh_policy_state(cfg, emb).params)
  # Stage 2 ran the frozen greedy policy of exactly that checkpoint.
  data = np.load(state_dir / "stage2_data.npz")
  greedy = np.asarray(stage1_lib.greedy(state, emb.policy_inputs(emb.query_role(TRAIN))))
  np.testing.assert_array_equal(greedy, data["choices"])
  # A record that does not match what is on disk is an error, not a silent fresh policy.
  broken = tmp_path / "state"
  shutil.copytree(state_dir / "checkpoints", broken / "checkpoints")
  (broken / "checkpoints/stage1/best.json").write_text(json.dumps({**best, "params_sha256": "0" * 64}))
  with pytest.raises(training.TrainingError, match="not what was saved"):
    training.load_best_policy(cfg, emb, broken)


def test_ablations_run_random_graphs_or_put_the_strong_model_everywhere(reference, sim):
  root, cell = reference
  item = TEST[0]

  async def solve(cfg):
    method = make_method("hieramas", config=cfg)
    method.load(_run_dir(sim, root) / "state")
    async with LLMClient(sim_endpoint(sim.base_url)) as client:
      return await method.solve(RunContext(client, get_pool(cfg.pool), cfg.seed), item)

  one = asyncio.run(solve(HieraMASConfig(**{**TINY.to_json(), "graph_mode": "random_vote"})))
  assert len(one.extra["vote_graphs"]) == 1  # the reference's w/o Graph: one random graph, one run
  assert sum(c.position == "decision" for c in one.calls) == 1
  vote = asyncio.run(solve(HieraMASConfig(**{**TINY.to_json(), "graph_mode": "random_vote", "vote_graphs": 3})))
  assert len(vote.extra["vote_graphs"]) == 3 and len(set(vote.extra["vote_graphs"])) == 3
  assert sum(c.position == "decision" for c in vote.calls) == 3  # three full MAS runs, all paid for
  assert vote.extra["graph_index"] in vote.extra["vote_graphs"]
  strong = asyncio.run(solve(HieraMASConfig(**{**TINY.to_json(), "llm_mode": "strong"})))
  assert {c.model for c in strong.calls} == {"gpt-5-mini"}
  # The rotation's drop rule is kept (at most 2 roles on MMLU-Redux); every kept role runs W = 2 proposers.
  kept = len(strong.extra["active_roles"])
  assert R - 2 <= kept <= R and len(strong.calls) == kept * 3 + 1
  # Through the runner, an inference-only ablation loads the untagged cell's fit instead of training.
  wo_graph = asyncio.run(_pipeline(sim, root, HieraMASConfig(**{**TINY.to_json(), "graph_mode": "random_vote"}),
                                   tag="wo_graph", load_from={"hieramas": "main"}))
  assert wo_graph["loaded_from"] == cell["run_dir"] and wo_graph["training"] is None
  assert not (_run_dir(sim, root, "wo_graph") / "state").exists()


def test_a_fit_whose_policy_is_its_fresh_initialisation_is_reported_did_not_learn(sim, tmp_path):
  # No stage-1 step: the policy the cell uses is its initialisation, and the report must say so.
  cfg = dataclasses.replace(TINY, stage1_steps=0)
  cell = asyncio.run(_pipeline(sim, tmp_path, cfg))
  assert cell["fit"]["stage1_best"]["step"] == 0
  ev = cell["fit"]["evidence"]["stage1"]
  assert ev["final"] == ev["untrained"] and ev["curve"] == [[0, ev["curve"][0][1], 0.0]]
  verdict = learning.cell_verdicts(cell["fit"], "fresh")["stage1"]
  assert verdict["verdict"] == learning.NOT_LEARNED and verdict["final_vs_untrained"]["ci"] == [0.0, 0.0]


def test_stage2_without_contrast_keeps_the_seeded_classifier_and_says_why(tmp_path):
  # Every query's graphs tied (the frozen policy's outcome did not depend on the topology): nothing to fit.
  cfg = dataclasses.replace(TINY, stage2_drop_ties=True)
  emb = training.Embeddings(Setup.make(cfg.benchmark, get_pool(cfg.pool), cfg.num_proposers), cfg.encoder)
  q, g = 6, 3
  rng = np.random.default_rng(0)
  reward = np.repeat(rng.choice([0.5, -1.0], size=(q, 1)), g, axis=1).astype(np.float32)
  data = {"query_emb": emb.queries(TRAIN), "adjacency": rng.random((q, g, R, R)) < 0.3, "reward": reward,
          "labels": stage2_lib.contrastive_labels(reward, top_k=2)}
  data["adjacency"] = np.triu(data["adjacency"], 1)
  params, history = training.train_stage2(data, emb, cfg, tmp_path, progress=False)
  assert "0 of 6 training queries" in history[0]["skipped"]
  fresh = training.fresh_scorer_params(cfg, emb)
  assert params_sha256(params) == params_sha256(fresh)
  assert params_sha256(training.load_scorer(cfg, emb, tmp_path)) == params_sha256(fresh)
  # One query with contrast is still too few (a training and a validation query are needed) ...
  reward[0, 0] = -1.0 if reward[0, 1] > 0 else 0.5
  _, history = training.train_stage2(data | {"reward": reward}, emb, cfg, tmp_path / "one", progress=False)
  assert "1 of 6" in history[0]["skipped"]
  # ... and the reference behaviour (ties kept) fits on all six.
  _, history = training.train_stage2(data, emb, dataclasses.replace(cfg, stage2_drop_ties=False), tmp_path / "ref",
                                     progress=False)
  assert "skipped" not in history[0] and len(history) >= 1
