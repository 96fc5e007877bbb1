"""A program computing several values in turn, tuned stage by stage (liftpy/rewrite/stages.py): its stages
found, each tuned on its own, joined back into one program that is checked here against numpy."""

import numpy as np

import liftpy
from liftpy.ir import Let
from liftpy.rewrite.route import RouteSpace
from liftpy.rewrite.stages import join_stages, split_stages
from liftpy.tuning.program import JOINED, ProgramTask
from liftpy.tuning.tuner import HOISTED_TRIALS, task_slots
from liftpy.tuning.db import TuningDB
from .conftest import QUIET
from .route_configs import example_config

# three stages: weights scaled (reads only a constant: run once, when prepared), a padded 3-tap filter, and
# the same filter again over its result; `padded` only rearranges data: no stage, it goes with its readers
TWO_FILTERS = """
def twoFilters(xs: [float]_n, ws: [float]_3) = {
  val scaled = map(w -> w * 0.5f, ws)
  val padded = pad(1, 1, 0.0f, xs)
  val smoothed = join(map(win -> reduce(0.0f, (acc, (x, w)) -> acc + x * w, zip(win, scaled)), slide(3, 1, padded)))
  join(map(win -> reduce(0.0f, (acc, (x, w)) -> acc + x * w, zip(win, scaled)), slide(3, 1, pad(1, 1, 0.0f, smoothed))))
}
"""
SIZES = {"n": 64}


def _filtered(xs, ws):
    """The 3-tap filter with zero padding, written directly in numpy (independent of liftpy)."""
    padded = np.concatenate([[0.0], xs, [0.0]])
    return ws[0] * padded[:-2] + ws[1] * padded[1:-1] + ws[2] * padded[2:]


def _expected(xs, ws):
    xs, ws = np.asarray(xs, np.float64), np.asarray(ws, np.float64) * 0.5
    return _filtered(_filtered(xs, ws), ws)


def _inputs(seed=3):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(64).astype(np.float32), rng.standard_normal(3).astype(np.float32)


def _task(tmp_path):
    path = tmp_path / "two_filters.lift"
    path.write_text(TWO_FILTERS)
    return ProgramTask.make(path, SIZES, constants=("ws",))


def test_stages_are_the_vals_that_compute_in_order_with_what_each_reads():
    program = liftpy.parse(TWO_FILTERS)
    stages = split_stages(program, constants=("ws",))
    assert [s.name for s in stages] == ["scaled", "smoothed", "twoFilters"]
    assert [s.reads for s in stages] == [("ws",), ("xs", "scaled"), ("scaled", "smoothed")]
    assert [s.hoisted for s in stages] == [True, False, False]  # scaled reads only the constant ws
    smoothed = stages[1].program.main
    assert isinstance(smoothed.body, Let) and smoothed.body.pattern.name == "padded"  # the view goes along
    # each stage computes its value: run in turn by the interpreter, they give the whole program's result
    xs, ws = _inputs()
    scaled = liftpy.evaluate(stages[0].program, {"ws": ws})
    smoothed = liftpy.evaluate(stages[1].program, {"xs": xs, "scaled": scaled})
    out = liftpy.evaluate(stages[2].program, {"smoothed": smoothed, "scaled": scaled})
    np.testing.assert_allclose(out, _expected(xs, ws), rtol=1e-5, atol=1e-5)


def test_a_program_of_one_value_is_one_stage():
    conv = liftpy.load(str(__import__("pathlib").Path(liftpy.__file__).parent / "nn" / "conv2d.lift"))
    assert [s.name for s in split_stages(conv, "conv2d")] == ["conv2d"]
    assert ProgramTask.make(liftpy.__file__.replace("__init__.py", "nn/conv2d.lift"),
                            {"N": 1, "C": 2, "H": 5, "W": 5, "K": 2, "kernelHeight": 3, "kernelWidth": 3,
                             "padSize": (1, 1, 1, 1), "stride": (1, 1), "dilation": (1, 1), "groups": 1},
                            "conv2d").stages()[0].stage is None


def test_a_result_that_only_rearranges_the_values_before_it_keeps_the_function_one_stage():
    program = liftpy.parse("""
def twoThenTranspose(xs: [[float]_n]_m) = {
  val doubled = map(row -> map(x -> x * 2.0f, row), xs)
  val squared = map(row -> map(x -> x * x, row), doubled)
  transpose(squared)
}
""")
    assert [s.name for s in split_stages(program)] == ["twoThenTranspose"]


def test_a_staged_task_is_tuned_as_slots_the_stage_run_once_capped(tmp_path):
    """Each stage a slot of the scheduler; the stage run once when the program is prepared (its speed costs
    nothing per call) gets HOISTED_TRIALS at most and adds nothing to the time per call."""
    task = _task(tmp_path)
    slots = task_slots(task)
    assert [s.task for s in slots] == list(task.stages())
    assert [s.per_call for s in slots] == [False, True, True]
    assert [s.cap for s in slots] == [HOISTED_TRIALS, None, None]


def test_stages_lowered_apart_join_into_one_program_with_their_vals_renamed_apart():
    """Both filters copy their padded input first (pad_copy 1): two vals named alike, one renamed."""
    program = liftpy.parse(TWO_FILTERS)
    lowered = {}
    for stage in split_stages(program, constants=("ws",)):
        space = RouteSpace(stage.program, SIZES)
        copied = {**example_config(space), "pad_copy": 1}
        lowered[stage.name] = space.lower(copied if space.valid(copied) else example_config(space))
    joined = join_stages(program, None, lowered)
    names = []
    body = joined.main.body
    while isinstance(body, Let):
        names += list(body.pattern.names())
        body = body.body
    assert len(names) == len(set(names)) and {"scaled", "smoothed", "padded", "padded_1", "padded_2"} <= set(names)
    xs, ws = _inputs(5)
    out = liftpy.compile(joined, SIZES).run({"xs": xs, "ws": ws}, poison=True).output
    np.testing.assert_allclose(out, _expected(xs, ws), rtol=1e-4, atol=1e-5)


def test_a_staged_program_is_tuned_stage_by_stage_and_its_best_joined(tmp_path):
    db = tmp_path / "t.sqlite"
    task = _task(tmp_path)
    best = liftpy.tune(task.path, sizes=SIZES, trials=7, db=db, repeat=1, **QUIET, confirm=1,
                       constants=("ws",))
    assert set(best.config) == {"scaled", "smoothed", "twoFilters"}
    counts = [len(t.trials) for t in best.stages]  # the stage run once its two; the scheduler shares the rest
    assert counts[0] == HOISTED_TRIALS and sum(counts) == 7 and min(counts) >= 1, counts
    # its figure is the joined program's, timed whole (a trial of its own), not its stages' sum
    wholes = TuningDB(db).trials(task, algorithm=JOINED)
    assert len(wholes) == 1 and wholes[0].status == "ok" and best.time_ms == wholes[0].time_ms == best.whole.time_ms
    assert wholes[0].config == {f"{stage}/{k}": v for stage, choices in best.config.items() for k, v in choices.items()}
    xs, ws = _inputs(7)
    prepared = best.compile().prepare({"ws": ws})
    np.testing.assert_allclose(prepared.run({"xs": xs}, poison=True).output, _expected(xs, ws),
                               rtol=1e-4, atol=1e-5)
    # each stage's trials are its own in the database; the best found there is the same program
    again = TuningDB(db).best(task)
    assert again.program == best.program and again.config == best.config and again.time_ms == best.time_ms
