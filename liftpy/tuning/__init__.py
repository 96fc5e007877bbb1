"""Auto-tuning: measured search over a layer's or a program's configurations, a tuning database, reports and
exports."""

from .db import TuningDB, default_db_path
from .program import ProgramTask
from .search import LocalSearchSampler, RandomSampler, Sampler, Tuned, resolve_layer, tune, tune_program

__all__ = ["tune", "tune_program", "Tuned", "ProgramTask", "TuningDB", "RandomSampler", "LocalSearchSampler", "Sampler", "default_db_path",
           "resolve_layer"]
