"""Every program of the language kept in the repository, for the tests that run over all of them (the printer's
round trip, the front end's fuzzer): the examples, the OpenCL test corpus, the convolution pipelines and the
prelude of macros."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LIFT_FILES = tuple(
    sorted(ROOT.glob("examples/*.lift"))
    + sorted(ROOT.glob("tests/corpus/*.lift"))
    + sorted(ROOT.glob("liftpy/nn/*.lift"))
    + [ROOT / "liftpy" / "prelude.lift"]
)


def short_name(path: Path) -> str:
    """The path from the repository root, as a test id: ``examples/conv_rows.lift``."""
    return path.relative_to(ROOT).as_posix()
