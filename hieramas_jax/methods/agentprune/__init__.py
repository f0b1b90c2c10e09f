"""AgentPrune (Zhang et al. 2025): learned spatial-temporal edge logits, pruned one-shot by magnitude.

  model.py   the edge logits and masks, edge sampling, the REINFORCE loss and Adam step, the pruning rule
  method.py  the `AgentPrune` method: fit (REINFORCE + pruning on real rollouts), load, solve
"""
