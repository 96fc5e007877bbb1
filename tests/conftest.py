import os
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
#: tuning options for tests of the tuner's mechanics, which are the same for every search: the local search, which
#: ranks nothing before measuring (the model-guided search, the default, is tested on its own), and no progress line
QUIET = dict(progress=False, strategy="local")
#: an untuned task runs its cost model's guess: here a small one (the tests check that it runs and computes
#: right, not how fast), in this process and in every command a test starts
os.environ.setdefault("LIFTPY_GUESS_POOL", "2")

settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture
def examples_dir() -> Path:
    return EXAMPLES


@pytest.fixture(autouse=True)
def short_confirmation_span(monkeypatch):
    """The tuner's confirmation takes rounds in turns for 5 s (CONFIRM_SPAN_MS: across the machine's slow
    spells), which every test tuning a few trials would pay for each task; the tests check its mechanics with
    0.2 s (test_tuner_parts.py checks the span itself)."""
    from liftpy.tuning import tuner

    monkeypatch.setattr(tuner, "CONFIRM_SPAN_MS", 200.0)
