"""Auto-tuning: measured search over a program task's configurations in the automatic route's space, a tuning
database that answers a task's best (:meth:`TuningDB.best`, a :class:`Best`), reports and exports.

It knows tasks (a program at given sizes), not layers: :mod:`liftpy.nn` makes a layer's tasks and asks here.
"""

from .db import Best, TuningDB, default_db_path
from .program import ProgramTask
from .search import LocalSearchSampler, Sampler, tune_program, tune_task

__all__ = ["tune_program", "tune_task", "Best", "ProgramTask", "TuningDB", "LocalSearchSampler", "Sampler",
           "default_db_path"]
