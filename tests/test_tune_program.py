"""Tuning any program through the automatic route: liftpy.tune(path, sizes=...), liftpy tune FILE, report and
export --program; every trial checked against the naive lowering on inputs of its own, the best result checked
here against numpy (tests/reference.py)."""

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import liftpy
from liftpy.cli import main
from liftpy.errors import InputError
from liftpy.tuning import TuningDB
from liftpy.tuning.program import ProgramTask, check_reference, reduced_sizes

from . import reference
from .test_programs import PROGRAMS
from .conftest import QUIET
from .route_configs import example_configs

CONV = PROGRAMS / "conv_bias_relu.lift"
CONV_SIZES = {"N": 1, "C": 4, "H": 9, "W": 10, "K": 6, "kernelHeight": 3, "kernelWidth": 3,
              "padSize": (1, 1, 1, 1), "stride": (1, 1)}
SIZE_ARGS = ["--size", "N=1", "--size", "C=4", "--size", "H=9", "--size", "W=10", "--size", "K=6",
             "--size", "kernelHeight=3", "--size", "kernelWidth=3", "--size", "padSize=1,1,1,1",
             "--size", "stride=1,1"]


def _conv_reference(x, w, b):
    return np.maximum(reference.conv2d_nchw(x, w, b, (1, 1), (1, 1, 1, 1)), 0)


def test_tune_a_program_from_python_and_run_the_best(tmp_path):
    db = tmp_path / "t.sqlite"
    best = liftpy.tune(str(CONV), sizes=CONV_SIZES, trials=5, db=db, repeat=1, **QUIET, confirm=2,
                       constants=("weights", "biases"))
    assert best.time_ms > 0 and set(best.config) == {"parallel", "sequential_outer", "unroll", "local_size", "vector",
                                                     "vector_outer", "pad_copy", "partial", "reorder", "local_memory",
                                                     "chunk", "join_rows", "round_up", "block.kernelWeights",
                                                     "block.window"}
    assert len(best.trials) == 5 and all(t.status == "ok" and t.max_error <= 1 for t in best.trials)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 4, 9, 10)).astype(np.float32)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    out = best.compile().run({"weights": w, "biases": b, "input": x}).output
    np.testing.assert_allclose(out, _conv_reference(x, w, b), rtol=1e-4, atol=1e-4)
    # resumed: five more trials, none repeated; the database keys the program by its structure and sizes
    again = liftpy.tune(CONV, sizes=CONV_SIZES, trials=10, db=db, repeat=1, **QUIET, confirm=0)
    configs = [tuple(sorted(t.config.items())) for t in again.trials]
    assert len(configs) == 10 == len(set(configs))
    with sqlite3.connect(db) as conn:
        keys = {r[0] for r in conn.execute("SELECT task_key FROM trials")}
    assert len(keys) == 1 and keys.pop().startswith("program ")


@pytest.mark.slow
def test_trials_recorded_before_a_choice_existed_are_resumed_not_repeated(tmp_path):
    """A database from before ``pad_copy`` existed (its configurations lack it) resumes: its trials count
    as the configurations with the choice's value by absence, and the search measures only new ones."""
    from liftpy.tuning import LocalSearch

    def padded_in_place_first(space, trials, seed, first):  # configurations that read the padding where it lies
        return LocalSearch(space, trials, seed, [c for c in example_configs(space) if c["pad_copy"] == 0][:2])

    options = {**QUIET, "strategy": padded_in_place_first}
    db = tmp_path / "t.sqlite"
    liftpy.tune(CONV, sizes=CONV_SIZES, trials=4, db=db, repeat=1, confirm=0, **options)
    with sqlite3.connect(db) as conn:
        for row_id, text in conn.execute("SELECT id, config FROM trials").fetchall():
            config = json.loads(text)
            if config.pop("pad_copy") == 0:
                conn.execute("UPDATE trials SET config = ? WHERE id = ?", (json.dumps(config, sort_keys=True), row_id))
        old = conn.execute("SELECT COUNT(*) FROM trials WHERE config NOT LIKE '%pad_copy%'").fetchone()[0]
    assert old >= 1
    again = liftpy.tune(CONV, sizes=CONV_SIZES, trials=7, db=db, repeat=1, confirm=0, **options)
    completed = [tuple(sorted({"pad_copy": 0, **t.config}.items())) for t in again.trials]
    assert len(completed) == 7 == len(set(completed))


@pytest.mark.slow
def test_a_wrong_kernel_is_recorded_and_never_chosen(tmp_path):
    """A planted fault (tests/faults.py: the first work-item returns, in half of the configurations) is
    caught by the comparison with the naive lowering, on NaN-filled buffers."""
    from .faults import faulty

    db = tmp_path / "t.sqlite"
    best = liftpy.tune(CONV, sizes=CONV_SIZES, trials=12, db=db, repeat=1, **QUIET, confirm=0,
                       fault="tests.faults:first_work_item_returns")
    wrong = [t for t in best.trials if faulty(t.config)]
    sound = [t for t in best.trials if not faulty(t.config)]
    assert wrong and sound
    assert all(t.status == "wrong" and "naive lowering" in t.cause for t in wrong)
    assert all(t.status == "ok" for t in sound) and not faulty(best.config)


def test_the_naive_reference_is_checked_against_the_interpreter_at_reduced_sizes():
    task = ProgramTask.make(PROGRAMS / "matmul.lift", {"n": 512, "k": 512, "m": 512})
    small = reduced_sizes(task)
    assert all(v <= 128 for v in small.values())
    assert check_reference(task) == small


def test_the_naive_reference_runs_the_levels_of_more_than_one_element_in_parallel():
    # a batch of one image: the image's map runs once, sequentially, and the kernels and rows take the two
    # parallel dimensions (given the batch, the naive kernel ran as one work-item)
    from liftpy.tuning.program import naive_program

    task = ProgramTask.make(CONV, CONV_SIZES)
    executable = liftpy.compile(naive_program(task), CONV_SIZES)
    (kernel,) = executable.generated.kernels
    assert sorted(kernel.launch.global_size) == [6, 9]  # K kernels, H rows
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 4, 9, 10)).astype(np.float32)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    out = executable.run({"input": x, "weights": w, "biases": b}, poison=True).output
    np.testing.assert_allclose(out, _conv_reference(x, w, b), rtol=1e-4, atol=1e-4)


def test_cli_tune_report_and_export_a_program(tmp_path, capsys):
    db = str(tmp_path / "t.sqlite")
    assert main(["tune", str(CONV), *SIZE_ARGS, "--trials", "3", "--db", db, "--repeat", "1",
                 "--constant", "weights"]) == 0
    out = capsys.readouterr().out
    assert "3 trials" in out and "best:" in out and "reduceSeq" in out  # the best low-level program printed
    assert main(["report", "--db", db, "--program", str(CONV), *SIZE_ARGS, "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "3 trials, 3 correct" in out and "the best low-level program" in out and "pareto-" in out
    best_dir = tmp_path / "best"
    assert main(["export", "--db", db, "--program", str(CONV), *SIZE_ARGS, "-o", str(best_dir)]) == 0
    assert (best_dir / "host.py").is_file() and (best_dir / "best.lift").is_file()
    rerun = subprocess.run([sys.executable, "host.py"], cwd=best_dir, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    exported = liftpy.load(best_dir / "best.lift")  # the printed best program is a program of the language
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 4, 9, 10)).astype(np.float32)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    out = liftpy.compile(exported, CONV_SIZES).run({"weights": w, "biases": b, "input": x}).output
    np.testing.assert_allclose(out, _conv_reference(x, w, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("args, message", [
    (["tune", str(CONV), "--size", "N=1"], "give --size values"),
    (["tune", str(CONV), *SIZE_ARGS, "--constant", "bias"], "bias: not an input of convBiasRelu"),
    (["tune", str(CONV), *SIZE_ARGS, "--layer", "vgg16.0"], "--layer: a convolution layer's options"),
    (["tune", "missing.lift", "--size", "N=1"], "missing.lift"),
    (["report", "--db", "{db}", "--program", str(CONV), *SIZE_ARGS, "--network", "vgg16"], "one or the other"),
])
def test_mistakes_are_one_error_line(tmp_path, capsys, args, message):
    db = tmp_path / "t.sqlite"
    TuningDB(db).close()
    assert main([a.format(db=db) for a in args]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_export_without_a_correct_trial_says_so(tmp_path, capsys):
    db = tmp_path / "t.sqlite"
    TuningDB(db).close()
    assert main(["export", "--db", str(db), "--program", str(CONV), *SIZE_ARGS, "-o", str(tmp_path / "b")]) == 1
    assert "no correct trial" in capsys.readouterr().err


def test_tune_asks_for_a_programs_sizes():
    with pytest.raises(InputError, match="give the program's sizes"):
        liftpy.tune(str(CONV))


def test_a_script_that_tunes_as_it_is_imported_gets_one_clear_error(tmp_path):
    """The tuner measures in a spawned process, which imports the user's script again: a script that tunes
    at its top level (no ``if __name__ == "__main__":``) made the worker tune too, and multiprocessing's
    refusal then failed every trial, each with two tracebacks. Now the spawned process leaves quietly and the
    tuner says why, in one error."""
    script = tmp_path / "tune_here.py"
    script.write_text(f"import liftpy\nliftpy.tune({str(CONV)!r}, sizes={CONV_SIZES!r}, trials=3, "
                      f"db={str(tmp_path / 't.sqlite')!r}, repeat=1, progress=False, confirm=0)\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    assert 'if __name__ == "__main__":' in run.stderr and run.stderr.count("Traceback") == 1  # the script's own
    assert "AttributeError" not in run.stderr and run.stderr.count("bootstrapping phase") == 0


def test_a_depthwise_layers_reference_is_checked_at_sizes_that_keep_its_one_kernel_per_group():
    """conv2d.lift as MobileNetV2's depthwise layer (32 groups of one channel and one kernel): shrinking the
    groups for the reference's check made each group's one kernel several, and the naive lowering made for the
    layer (that level sequential, a loop of one) a sequential loop around a parallel map, which the code
    generator refuses: such a layer could not be tuned at all."""
    sizes = dict(N=1, C=32, H=112, W=112, K=32, groups=32, kernelHeight=3, kernelWidth=3, padSize=(1, 1, 1, 1),
                 stride=(1, 1), dilation=(1, 1))
    path = Path(liftpy.__file__).parent / "nn" / "conv2d.lift"
    task = ProgramTask(str(path), tuple(sorted(sizes.items())), "conv2d", ("weights", "biases"))
    checked = check_reference(task)
    assert checked == reduced_sizes(task)
    assert (checked["groups"], checked["C"], checked["K"]) == (32, 32, 32) and checked["H"] < 112
