"""HieraMAS (paper Sec. 3): learned supernode LLM selection + GCN topology selection, end to end.

Built as "hieramas" (as published: the paper, and the reference code where the paper is silent) and
"hieramas_total_cost" (this suite's earlier recipe, `config.TOTAL_COST_RECIPE`, beyond the paper). The
heavy parts (JAX, the sentence encoder) are imported only when the method is built, so
`make_method("base")` stays as cheap as before. Both factories are rows of `methods/registry.py`.

  rollout.py   policy choices + a DAG -> MASConfig -> run_mas over HTTP -> graded node/system rewards
  training.py  stage 1 (REINFORCE, multi-level rewards) and stage 2 (contrastive GCN labels) loops
  method.py    the `HieraMAS` method: fit(train, val, ctx), load(state_dir), solve(ctx, item)
The runner (`experiment/runner.py`) trains, loads and evaluates it like every other method.
"""

from __future__ import annotations


def make_hieramas(*, benchmark: str | None = None, pool: str | None = None, seed: int = 0, config=None, **fields):
  """`make_method("hieramas", benchmark=..., pool=..., seed=..., stage1_steps=20)`, or with a whole
  `config=HieraMASConfig(...)` (whose benchmark, pool and seed must then agree with the cell's)."""
  from hieramas_jax.methods.hieramas.config import HieraMASConfig  # pylint: disable=import-outside-toplevel
  from hieramas_jax.methods.hieramas.method import HieraMAS, HieraMASError  # pylint: disable=import-outside-toplevel
  if config is None:
    cell = {k: v for k, v in (("benchmark", benchmark), ("pool", pool)) if v is not None}
    config = HieraMASConfig(**cell, seed=seed, **fields)
  else:
    if fields:
      raise HieraMASError(f"give either config= or fields, not both ({', '.join(sorted(fields))})")
    for name, value in (("benchmark", benchmark), ("pool", pool)):
      if value is not None and getattr(config, name) != value:
        raise HieraMASError(f"config.{name} is {getattr(config, name)!r} but the cell's is {value!r}")
  return HieraMAS(config)


def make_hieramas_total_cost(*, benchmark: str | None = None, pool: str | None = None, seed: int = 0, **fields):
  """HieraMAS with `config.TOTAL_COST_RECIPE` (fields given here override it): the same runner, its own row."""
  from hieramas_jax.methods.hieramas.config import TOTAL_COST_RECIPE  # pylint: disable=import-outside-toplevel
  method = make_hieramas(benchmark=benchmark, pool=pool, seed=seed, **{**TOTAL_COST_RECIPE, **fields})
  method.name = "hieramas_total_cost"
  return method
