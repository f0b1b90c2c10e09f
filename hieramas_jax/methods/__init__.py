"""Table 1 methods behind one interface (`api.Method.solve(ctx, item) -> Trace`), built by name
through `registry.make_method`.

Nothing is imported here: `api.py` is the interface every method imports, `registry.py` the table that
imports every method; importing a method package must not drag in the others.
"""
