"""Auto-tuning: measured search over a program's configurations in the automatic route's space (a convolution
layer's program included), a tuning database, reports and exports."""

from .db import TuningDB, default_db_path
from .program import ProgramTask
from .search import LocalSearchSampler, Sampler, Tuned, resolve_layer, tune, tune_program, tune_task

__all__ = ["tune", "tune_program", "tune_task", "Tuned", "ProgramTask", "TuningDB", "LocalSearchSampler", "Sampler",
           "default_db_path", "resolve_layer"]
