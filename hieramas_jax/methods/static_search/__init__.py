"""The oracle of the regret: the best static configuration (`static_search`, whose fit is a successive-
halving search) and uniformly random static configurations (`random_config`).

  space.py   the search space, candidate families, a configuration's key and description
  store.py   the per-query evaluation store, scores, the evaluator
  search.py  successive halving, the holdout re-ranking, the search config (`SearchConfig`)
  method.py  the two methods
"""
