"""HieraMAS (paper Sec. 3): learned supernode LLM selection + GCN topology selection, end to end.

Registered as "hieramas". The heavy parts (JAX, the sentence encoder) are imported only when the
method is built, so `make_method("base")` stays as cheap as before.

  rollout.py   policy choices + a DAG -> MASConfig -> run_mas over HTTP -> graded node/system rewards
  training.py  stage 1 (REINFORCE, multi-level rewards) and stage 2 (contrastive GCN labels) loops
  method.py    the `HieraMAS` method: fit(train, val, ctx=...) and solve(ctx, item)
  run.py       train + evaluate on one benchmark into a run directory and results/ (the entry point's body)
"""

from __future__ import annotations

from hieramas_jax.methods.api import register


@register("hieramas")
def make_hieramas(**kwargs):
  """`make_method("hieramas", config=HieraMASConfig(...), run_dir=...)`."""
  from hieramas_jax.methods.hieramas.method import HieraMAS  # pylint: disable=import-outside-toplevel
  return HieraMAS(**kwargs)
