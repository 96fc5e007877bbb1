"""Auto-tuning: measured search over a layer's configurations, a tuning database, reports and exports."""

from .db import TuningDB, default_db_path, layer_key
from .search import RandomSampler, Sampler, resolve_layer, tune

__all__ = ["tune", "TuningDB", "RandomSampler", "Sampler", "default_db_path", "layer_key", "resolve_layer"]
