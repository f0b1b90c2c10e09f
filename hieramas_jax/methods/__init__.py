"""Table 1 methods behind one interface (`Method.solve(ctx, item) -> Trace`), constructible by name."""

from hieramas_jax.methods.api import (METHODS, Method, RunContext, UnknownMethodError, check_method_names,
                                      known_methods, make_method, register)

__all__ = ["METHODS", "Method", "RunContext", "UnknownMethodError", "check_method_names", "known_methods",
           "make_method", "register"]
