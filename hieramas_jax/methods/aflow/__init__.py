"""AFlow (Zhang et al. 2024): Monte Carlo tree search over agentic workflows built from operators.

  workflow.py  the operators (Custom, ScEnsemble, Programmer, Review/Revise, Test) and workflows built from them
  execute.py   model-written code (Programmer, Test) run in the suite's sandbox
  search.py    the search loop: parent selection, modification, evaluation on the validation split
  method.py    the `AFlow` method: fit (the search), load (the best workflow), solve
Where AFlow's optimizer LLM writes workflow code, this search draws one-step operator edits instead
(docs/methods.md).
"""
