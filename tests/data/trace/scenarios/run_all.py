"""Run the training scenarios of this folder in one process: all of them, or those named on the command line."""
import importlib
import sys

SCENARIOS = (
    "numerics_contrastive",
    "numerics_masked_mean",
    "numerics_gem_pooling",
    "numerics_count_log",
    "numerics_half_precision",
    "numerics_where_and_filter",
    "numerics_angular",
    "fused_log_softmax",
    "fused_gan",
    "fused_entropy",
)

for name in sys.argv[1:] or SCENARIOS:
    importlib.import_module(name).main()
    print(name, "done")
