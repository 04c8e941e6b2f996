"""``torchlint trace``: run a program with the sites of the static findings checked at run time.

Two processes take part.  The torchlint process (``command``, ``operands``, ``report``) runs the
static check over the project, works out for each numerics (TL1xx) and fused-op (TL2xx) finding the
expression its rule is about (``operands``), starts the program and reports when it ends.  The traced
process (``bootstrap``, ``rewrite``, ``runtime``) rewrites the project's modules in memory as they
are imported (``rewrite``: a probe call around each site's operand), runs the program as ``python``
would, and records what the probes and the watch over every torch op saw (``runtime``: the only
modules that import torch).  ``plan`` is what the two exchange: the sites going in, the results
coming out.  ``torchlint check`` never imports this package.
"""
