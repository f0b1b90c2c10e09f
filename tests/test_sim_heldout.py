"""The held-out prompt suite (issue 28, item 4): prompts from other codebases, none of the suite's own, every kind
present, and a run through the official openai client against the served sim that yields a verdict per prompt."""

from __future__ import annotations

from hieramas_jax.benchmarks.data import load_items
from hieramas_jax.experiment import heldout_prompts as H
from hieramas_jax.mas import roles
from hieramas_jax.sim.server import SimConfig, start_sim_in_thread


def test_at_least_thirty_prompts_each_named_by_repository_and_file_and_none_of_the_suites_own():
  assert len(H.PROMPTS) >= 30 and len({p.name for p in H.PROMPTS}) == len(H.PROMPTS)
  assert {p.kind for p in H.PROMPTS} == {"cot", "direct", "aggregate", "decision", "debate", "critique"}
  own = [roles.MOA_SYNTHESIS_PROMPT, *roles.ANSWER_FORMAT.values(), *roles.DECISION_ROLE.values(),
         *roles.DECISION_CONSTRAINT.values(), roles.HELPFUL_ASSISTANT]  # "Let's think step by step." is Kojima's
  items = {b: load_items(b)[0] for b in ("math", "mmlu_redux")}
  for p in H.PROMPTS:
    repo = p.source.split(" ")[0]
    assert repo.count("/") == 1 and " " in p.source, p.source
    text = "\n".join(m["content"] for m in p.build(items[p.benchmark], ["\\boxed{1}"] * 3, "\\boxed{1}"))
    assert not [t for t in own if t in text], p.name


def test_a_small_run_gives_every_prompt_an_accuracy_a_bound_and_a_verdict():
  kinds, chosen = set(), []
  for p in H.PROMPTS:
    if p.kind not in kinds:
      kinds.add(p.kind)
      chosen.append(p)
  with start_sim_in_thread(SimConfig(seed=0)) as sim:
    record = H.run_heldout_prompts(sim.base_url, n_items=12, prompts=chosen)
  assert [r["name"] for r in record["rows"]] == [p.name for p in chosen]
  for r in record["rows"]:
    assert 0 <= r["accuracy"] <= 100 and r["bound"][0] < r["bound"][1] and r["completion_tokens"] > 0
    assert isinstance(r["accuracy_ok"], bool) and isinstance(r["tokens_ok"], bool)
  assert "Held-out prompt suite" in H.heldout_markdown(record, "simulated pool (profile fitted)")
