"""HieraMAS (paper Sec. 3): learned supernode LLM selection + GCN topology selection, end to end.

Built as "hieramas" (as published: the paper, and the reference code where the paper is silent) and
"hieramas_total_cost" (this suite's earlier recipe, `config.TOTAL_COST_RECIPE`, beyond the paper). The
heavy parts (JAX, the sentence encoder) are imported only when the method is built, so
`make_method("base")` stays as cheap as before: the factories (`method.make`, `method.make_total_cost`)
are imported by `methods/registry.py` inside its rows.

  rollout.py   policy choices + a DAG -> MASConfig -> run_mas over HTTP -> graded node/system rewards
  training.py  stage 1 (REINFORCE, multi-level rewards) and stage 2 (contrastive GCN labels) loops
  method.py    the `HieraMAS` method: fit(train, val, ctx), load(state_dir), solve(ctx, item)
The runner (`experiment/runner.py`) trains, loads and evaluates it like every other method.
"""
