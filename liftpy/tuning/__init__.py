"""Auto-tuning: tasks (a program at given sizes) tuned through the automatic route's spaces by a search
strategy, a builder, a runner, a task scheduler and a tuning database (:mod:`liftpy.tuning.tuner` says how they
fit), a model-guided search reading candidates' features through a cost model; the database answers a task's best (:meth:`TuningDB.best`, a :class:`Best`); reports and exports.

It knows tasks, not layers: :mod:`liftpy.nn` makes a layer's tasks and asks here.
"""

from .builder import Build, Built, InlineBuilder, LocalBuilder
from .cost_model import AnalyticModel, CostModel, DeviceModel, LearnedModel
from .db import Best, TuningDB, default_db_path
from .measure import Timing
from .program import ProgramTask
from .runner import Batch, LocalRunner
from .scheduler import Slot, TaskScheduler
from .features import program_features
from .strategy import LocalSearch, ModelGuided, SearchStrategy
from .tuner import Tuner, tune_groups, tune_program, tune_task

__all__ = ["tune_program", "tune_task", "tune_groups", "Tuner", "Best", "ProgramTask", "TuningDB",
           "default_db_path", "Timing", "Build", "Built", "InlineBuilder", "LocalBuilder", "Batch", "LocalRunner",
           "Slot", "TaskScheduler", "LocalSearch", "ModelGuided", "SearchStrategy", "CostModel", "AnalyticModel",
           "LearnedModel", "DeviceModel", "program_features"]
