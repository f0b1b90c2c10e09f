"""Learning evidence and verdicts: a policy or classifier that is its own initialisation "did not learn"."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hieramas_jax.learn import evidence, gcn, stage2
from hieramas_jax.methods.hieramas import training
from hieramas_jax.methods.hieramas.config import HieraMASConfig
from hieramas_jax.report import ablations, learning
from hieramas_jax.report.hieramas import results_name


def test_verdict_is_learned_only_when_the_whole_interval_is_above_zero():
  assert learning.learned([0.1, 3.0])
  assert not learning.learned([0.0, 3.0])  # touching 0 is inside noise
  assert not learning.learned([-0.5, 3.0])
  assert not learning.learned([-3.0, -0.1])


def test_policy_drift_by_hand():
  uniform = jnp.full((2, 1, 2, 4), 0.25)
  mask = jnp.ones((1, 2), bool)
  entropy, kl = evidence.policy_drift(uniform, uniform, mask)
  assert float(entropy) == pytest.approx(math.log(4), abs=1e-6) and float(kl) == pytest.approx(0.0, abs=1e-7)
  peaked = jnp.broadcast_to(jnp.array([0.7, 0.1, 0.1, 0.1]), (2, 1, 2, 4))
  entropy, kl = evidence.policy_drift(peaked, uniform, mask)
  hand_h = -(0.7 * math.log(0.7) + 3 * 0.1 * math.log(0.1))
  hand_kl = 0.7 * math.log(0.7 / 0.25) + 3 * 0.1 * math.log(0.1 / 0.25)
  assert float(entropy) == pytest.approx(hand_h, rel=1e-5) and float(kl) == pytest.approx(hand_kl, rel=1e-5)
  # A padding position counts for nothing.
  half = jnp.array([[True, False]])
  mixed = uniform.at[:, :, 1].set(peaked[:, :, 1])
  _, kl = evidence.policy_drift(mixed, uniform, half)
  assert float(kl) == pytest.approx(0.0, abs=1e-7)


def test_top1_hits_and_auc_by_hand():
  scores = np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 1.0], [1.0, 1.0, 1.0]])
  labels = np.array([[1, 0, 0], [1, 0, 1], [0, 0, 0]])
  mask = np.ones((3, 3), bool)
  hits = evidence.top1_hits(scores, labels, mask)
  np.testing.assert_array_equal(hits["query"], [0, 1])  # the third query has no positive
  np.testing.assert_array_equal(hits["hit"], [1.0, 0.0])
  np.testing.assert_allclose(hits["chance"], [1 / 3, 2 / 3])
  # Positives 3, 0, 1 against negatives 1, 2, 5, 1 (and the third query's 1, 1, 1): count wins, ties 1/2.
  s, y = scores.ravel(), labels.ravel().astype(bool)
  pos, neg = s[y], s[~y]
  hand = np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg])
  assert evidence.auc(s, y) == pytest.approx(hand)
  assert evidence.auc([1.0, 2.0], [True, True]) is None


def _outcomes(solved):
  return {"solved": "".join(str(int(x)) for x in solved), "reward": [0.5 if x else -1.0 for x in solved]}


def test_stage1_verdict_against_hand_made_outcomes():
  rng = np.random.default_rng(0)
  untrained = rng.random(200) < 0.5
  curve = [[0, 2.197, 0.0], [12, 2.19, 0.001]]
  same = {"select_by": "accuracy", "max_entropy": math.log(9), "curve": curve, "untrained": _outcomes(untrained),
          "final_step": 12, "final": _outcomes(untrained), "best_step": 12, "best": _outcomes(untrained)}
  v = learning.stage1_verdict(same)
  assert v["verdict"] == learning.NOT_LEARNED and v["final_vs_untrained"]["ci"] == [0.0, 0.0]
  better = dict(same, final=_outcomes(untrained | (rng.random(200) < 0.6)))
  v = learning.stage1_verdict(better)
  assert v["verdict"] == learning.LEARNED and v["final_vs_untrained"]["ci"][0] > 0
  # By reward (the total-cost recipe selects by it): the same outcomes decide the same way.
  assert learning.stage1_verdict(dict(better, select_by="reward"))["verdict"] == learning.LEARNED
  text = learning.stage1_text(v)
  assert text.startswith("**learned**") and "entropy 2.197 -> 2.190 of max 2.197" in text
  assert learning.stage1_verdict(None)["verdict"] is None  # an old fit: not recorded, no verdict


def _stage2_batch(q=40, g=5, n=3, dim=8, seed=0):
  rng = np.random.default_rng(seed)
  labels = (rng.random((q, g)) < 0.4).astype(np.float32)
  labels[:, 0] = 1.0  # every query has a positive and (almost surely) a negative
  return stage2.Stage2Batch(query_emb=rng.normal(size=(q, dim)).astype(np.float32),
                            role_emb=rng.normal(size=(n, dim)).astype(np.float32),
                            adjacency=np.triu(rng.random((q, g, n, n)) < 0.5, 1), node_mask=np.ones((q, g, n), bool),
                            labels=labels, label_mask=np.ones((q, g), bool), pos_weight=np.float32(1.0))


def test_a_classifier_that_is_its_fresh_initialisation_did_not_learn():
  cfg = HieraMASConfig(benchmark="math", gcn_hidden=8, stage2_val_fraction=0.5)
  batch = _stage2_batch()
  net = training.scorer_net(cfg)
  fresh = gcn.init_params(jax.random.key(0), batch.query_emb[:1], batch.role_emb, batch.adjacency[0],
                          batch.node_mask[0], net)
  ev = training.classifier_evidence(fresh, fresh, batch, cfg)
  assert ev["queries"] == 20 and len(ev["trained"]["hit"]) == 20 and len(ev["label"]) == 20 * 5
  v = learning.stage2_verdict(ev)
  assert v["verdict"] == learning.NOT_LEARNED and v["hit_vs_fresh"]["ci"] == [0.0, 0.0]
  assert v["auc_vs_fresh_ci"] == (0.0, 0.0)
  # The same evidence with the trained classifier's hits all positive (a hand-made better classifier): learned.
  ev_good = dict(ev, trained=dict(ev["trained"], hit=[1] * 20))
  ev_good["fresh"] = dict(ev["fresh"], hit=[0] * 20)
  assert learning.stage2_verdict(ev_good)["verdict"] == learning.LEARNED
  # Never fit: did not learn, and the cells never call it trained.
  skipped = learning.stage2_verdict({"skipped": "0 of 6 training queries show any reward difference"})
  assert skipped["verdict"] == learning.NOT_LEARNED
  assert learning.classifier_state(skipped, skipped=True) == "not fit (left at initialisation)"
  assert learning.classifier_state(v, skipped=False) == "fit; at chance (did not learn)"


def test_rows_inside_noise_are_marked():
  ids = "abc"
  main = {"ids_sha256": ids, "correct": "1" * 50 + "0" * 50}
  close = {"ids_sha256": ids, "correct": "1" * 51 + "0" * 49}
  far = {"ids_sha256": ids, "correct": "1" * 90 + "0" * 10}
  assert learning.compare_rows(close, main, "k50")["inside_noise"] is True
  c = learning.compare_rows(far, main, "k500")
  assert c["inside_noise"] is False and c["delta"] == pytest.approx(40.0)
  assert "inside noise" in learning.noise_text(learning.compare_rows(close, main, "k50"))
  assert learning.compare_rows(far, {**main, "ids_sha256": "other"}, "x") is None  # other queries: no pairing


def test_label_sources_split_contrast_into_solving_and_cost_by_hand():
  solved = np.array([[1, 1, 1], [1, 0, 1], [0, 0, 0], [1, 1, 1]], bool)
  reward = np.array([[0.5, 0.6, 0.5], [0.5, -1.0, 0.5], [-1.0, -1.1, -1.0], [0.5, 0.5, 0.5]])
  cost = np.array([[2e-3, 1e-3, 2e-3], [1e-3, 1e-3, 1e-3], [0.0, 3e-4, 0.0], [1e-3] * 3])
  adjacency = np.zeros((4, 3, 3, 3), bool)
  adjacency[:, 1, 0, 1] = True  # graph 1 of every query has one edge of 3: density 1/3
  ls = evidence.label_sources(solved, reward, adjacency, cost)
  # Query 0: cost only; 1: solved vs unsolved; 2: cost only (all failed); 3: no contrast.
  assert (ls["contrastive"], ls["solved_vs_unsolved"], ls["cost_only"]) == (3, 1, 2)
  assert ls["share_solved_vs_unsolved"] == pytest.approx(1 / 3) and ls["graph_solve_rate"] == pytest.approx(8 / 12)
  # Within each query the denser graph is the one that failed (query 1) and costs less (0) or more (2).
  assert ls["spearman_density_solved"] < 0
  assert evidence.spearman([1, 2, 3], [2, 4, 9]) == pytest.approx(1.0) and evidence.spearman([1, 1], [1, 2]) is None
  text = learning.label_sources_text(ls)
  assert text == "1 solved-vs-unsolved / 2 cost-only of 3 (33% see solving)"


def test_ablation_rows_over_seeds_pair_each_seed_with_its_own_main_run(tmp_path):
  def write(tag, seed, correct, ids="q"):
    name = results_name("math", "gpt-5-mini", tag, seed)
    r = {"accuracy": 100.0 * correct.count("1") / len(correct), "n": len(correct), "mean_cost_usd": 0.01,
         "outcomes": {"ids_sha256": ids, "correct": correct}}
    (tmp_path / f"{name}.json").write_text(json.dumps(r))
  # Main run 50% on every seed; w/o Graph 10 points better on seeds 0 and 1, 12 on seed 2.
  for seed, extra in ((0, 5), (1, 5), (2, 6)):
    write("", seed, "1" * 25 + "0" * 25)
    write("wo_graph", seed, "1" * (25 + extra) + "0" * (25 - extra))
  assert sorted(ablations.seed_paths(tmp_path, "math", "gpt-5-mini", "wo_graph")) == [0, 1, 2]
  record = ablations.ablation_record("table2", tmp_path, {"backend": "sim", "command": "test"})
  cell = record["cells"]["wo_graph|math|gpt-5-mini"]
  assert cell["across_seeds"]["n"] == 3 and cell["across_seeds"]["mean"] == pytest.approx(100 * (30 + 30 + 31) / 150)
  vs = cell["vs_main_across_seeds"]
  assert vs["deltas"] == pytest.approx([10.0, 10.0, 12.0]) and vs["inside_noise"] is False
  half = 4.303 * np.std([10, 10, 12], ddof=1) / math.sqrt(3)  # t(2) interval by hand
  assert vs["ci"] == pytest.approx([32 / 3 - half, 32 / 3 + half])
  md = ablations.ablation_markdown(record)
  assert "3 seeds: 60.67 ± 1.15, vs comparison +10.7 [" in md
  # One seed differing by chance: its interval holds 0.
  assert learning.seed_comparison([1.0, -2.0, 0.5])["inside_noise"] is True
  assert learning.seed_comparison([1.0]) is None


def test_a_sweep_with_a_seed_axis_is_summarised_over_seeds():
  rows, outcomes = [], []
  for k, extra in ((50, 0), (500, 1)):
    for seed in range(3):
      correct = "1" * (20 + extra + (seed == 2)) + "0" * (20 - extra - (seed == 2))
      rows.append({"values": {"k_pool": k, "seed": seed}, "done": True, "accuracy": 100 * correct.count("1") / 40})
      outcomes.append({"ids_sha256": f"s{seed}", "correct": correct})
  groups = learning.seed_groups(rows, outcomes)
  assert [g["values"] for g in groups] == [{"k_pool": 50}, {"k_pool": 500}]
  assert groups[0]["across_seeds"]["n"] == 3 and "vs_first_across_seeds" not in groups[0]
  vs = groups[1]["vs_first_across_seeds"]
  assert vs["deltas"] == pytest.approx([2.5, 2.5, 2.5]) and vs["sd"] == 0.0 and vs["inside_noise"] is False
  assert learning.seed_groups([{"values": {"k_pool": 50}, "done": True, "accuracy": 1.0}], [None]) == []
  assert "| {\"k_pool\": 500} | 3 seeds: 53.33 ± 1.44, vs comparison +2.5 [+2.5, +2.5] |" in \
      "\n".join(learning.seed_group_lines(groups))


def test_points_are_marked_against_the_first_with_outcomes():
  rows = [{}, {}, {}]
  outs = [None, {"ids_sha256": "a", "correct": "1" * 30 + "0" * 30}, {"ids_sha256": "a", "correct": "1" * 31 + "0" * 29}]
  learning.mark_against_first(rows, outs, "sweep")
  assert rows[0]["vs_first"] is None and rows[1]["vs_first"] is None  # no outcomes; the reference itself
  assert rows[2]["vs_first"]["delta"] == pytest.approx(100 / 60) and rows[2]["vs_first"]["inside_noise"] is True


def test_sweep_points_are_marked_against_the_first_point_of_their_own_seed():
  """Two seeds are two simulated worlds: a point is compared with the first point of its own seed, never with
  another seed's (the first committed K sweep paired seed 1's K = 200 with seed 0's K = 50)."""
  out = lambda k: {"ids_sha256": "a", "correct": "1" * k + "0" * (60 - k)}  # noqa: E731
  rows = [{}, {}, {}, {}]
  learning.mark_against_first(rows, [out(30), out(40), out(31), out(50)], "sweep", [0, 1, 0, 1])
  assert rows[0]["vs_first"] is None and rows[1]["vs_first"] is None   # each seed's reference
  assert rows[2]["vs_first"]["delta"] == pytest.approx(100 / 60)       # seed 0: 31 vs 30
  assert rows[3]["vs_first"]["delta"] == pytest.approx(1000 / 60)      # seed 1: 50 vs 40
