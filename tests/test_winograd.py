"""Winograd's F(2x2, 3x3) as a second high-level program of a 3x3 layer of stride 1 (liftpy/nn/winograd.py):
its meaning against numpy's convolution, its stages tuned through the automatic route, and nn.Conv2d running
it when the tuning database knows it as the layer's fastest -- every output against tests/reference.py."""

import numpy as np
import pytest

import liftpy
from liftpy import nn
from liftpy.cli import main
from liftpy.nn import winograd
from liftpy.nn.conv import DIRECT, WINOGRAD, best_in_database, make_layer
from liftpy.tuning.db import TuningDB

from . import reference
from .test_nn import _run_host_script
from .conftest import QUIET


def _inputs(layer, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((layer.batch, layer.channels, layer.height, layer.width)).astype(np.float32)
    w = rng.standard_normal((layer.kernels, layer.channels, 3, 3)).astype(np.float32)
    b = rng.standard_normal(layer.kernels).astype(np.float32)
    return x, w, b


def _expected(layer, x, w, b):
    return reference.conv2d_nchw(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), layer.stride,
                                 layer.padding)


@pytest.mark.parametrize("shape, padding, batch", [
    ((3, 6, 8, 4), 1, 1),               # even output: no crop
    ((2, 5, 7, 3), 1, 2),               # odd height and width, two images
    ((2, 6, 5, 2), (0, 2, 1, 0), 1),    # asymmetric padding, odd width
    ((1, 3, 3, 1), 0, 1),               # one output: one tile, cropped to 1 x 1
])
def test_the_program_means_the_convolution(shape, padding, batch):
    channels, height, width, kernels = shape
    layer = make_layer((channels, height, width), (kernels, 3, 3), 1, padding, batch=batch)
    pad_size, crop = winograd.program_padding(layer)
    x, w, b = _inputs(layer, 1)
    program = liftpy.load(winograd.winograd_task(layer).path)
    out = liftpy.evaluate(program, {"input": x, "weights": w, "biases": b, **winograd.transforms()},
                          sizes={"padSize": pad_size, "crop": crop}, function="conv2dWinograd")
    np.testing.assert_allclose(out, _expected(layer, x, w, b), rtol=1e-4, atol=1e-4)


def test_which_layers_it_computes():
    assert winograd.applies(make_layer((4, 8, 8), (4, 3, 3), 1, 1))
    assert not winograd.applies(make_layer((4, 8, 8), (4, 3, 3), 2, 1))  # stride 2
    assert not winograd.applies(make_layer((4, 8, 8), (4, 3, 3), 1, 2, dilation=2))
    assert not winograd.applies(make_layer((4, 8, 8), (4, 3, 3), 1, 1, groups=2))
    assert not winograd.applies(make_layer((4, 8, 8), (4, 5, 5), 1, 2))


def test_the_stages_are_tuned_and_the_layer_runs_winograd_when_it_is_the_fastest_known(tmp_path, capsys):
    """Only Winograd's stages in the database: nn.Conv2d runs it, checked against the reference."""
    db = tmp_path / "t.sqlite"
    layer = make_layer((4, 7, 9), (6, 3, 3), 1, 1, batch=2)
    task = winograd.winograd_task(layer)
    assert [s.stage for s in task.stages()] == ["v", "u", "m", "conv2dWinograd"]
    assert [s.hoisted for s in task.stages()] == [False, True, False, False]  # u: the kernels' transform
    tuned = liftpy.tune(task.path, sizes=task.size_map, trials=5, db=db, function=task.function,
                        constants=task.constants, repeat=1, **QUIET, confirm=0)
    assert set(tuned.config) == {"v", "u", "m", "conv2dWinograd"}
    database = TuningDB(db)
    known = best_in_database(database, layer, None)
    database.close()
    assert known.name == WINOGRAD and known.time_ms == tuned.time_ms
    x, w, b = _inputs(layer, 2)
    conv = nn.Conv2d(w, b, 1, 1, db=db)
    out = conv(x)  # its first call checked against the float64 reference too
    assert conv.plans[0].algorithm == WINOGRAD and conv.last_run.max_error <= 1
    np.testing.assert_allclose(out, _expected(layer, x, w, b), rtol=1e-4, atol=1e-4)
    x2 = _inputs(layer, 3)[0]  # a second call on other images: the weights' transform kept
    np.testing.assert_allclose(conv(x2), _expected(layer, x2, w, b), rtol=1e-4, atol=1e-4)
    shape = ["--db", str(db), "--input", "4x7x9", "--kernels", "6x3x3", "--padding", "1", "--batch", "2"]
    capsys.readouterr()
    assert main(["report", *shape, "-o", str(tmp_path)]) == 0  # the direct program untuned: Winograd's stages
    assert "tuned stage by stage" in capsys.readouterr().out.splitlines()[-2]
    # liftpy export writes Winograd's kernels, the transforms beside them; its host script computes the layer
    out_dir = tmp_path / "best"
    assert main(["export", *shape, "-o", str(out_dir)]) == 0
    assert "conv2d_winograd.lift" in (out_dir / "README.txt").read_text()
    got = _run_host_script(out_dir, tmp_path, {"input": x, "weights": w, "biases": b, **winograd.transforms()},
                           tmp_path / "y.npy")
    np.testing.assert_allclose(got, _expected(layer, x, w, b), rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_a_layer_whose_winograd_program_gets_no_correct_trial_keeps_the_direct_program(tmp_path, capsys):
    """liftpy.tune(layer) tunes both programs; where every trial of one of Winograd's stages is wrong (a planted
    fault scales stage u's output), the layer is left to the direct program, which the tuner says; asked for
    Winograd's program alone, the tuner refuses with the reason."""
    from liftpy.errors import NoCorrectTrial

    db = tmp_path / "t.sqlite"
    layer = make_layer((4, 7, 9), (6, 3, 3), 1, 1)
    fault = "tests.faults:winograd_weights_scaled"
    best = liftpy.tune(layer, trials=2, db=db, repeat=1, **QUIET, confirm=0, fault=fault)
    assert not best.stages and best.task == nn.route_task(layer)
    assert best.trials and all(t.status == "ok" for t in best.trials)  # one budget: the scheduler's share
    note = capsys.readouterr().err
    assert "winograd left out: no correct trial" in note and "stage u" in note and "failures: wrong" in note
    database = TuningDB(db)
    u = next(s for s in winograd.winograd_task(layer).stages() if s.stage == "u")
    statuses = [t.status for t in database.trials(u, None)]
    assert statuses and set(statuses) == {"wrong"}
    assert best_in_database(database, layer, None).name == DIRECT
    database.close()
    with pytest.raises(NoCorrectTrial, match="stage u"):
        liftpy.tune(layer, trials=2, db=db, repeat=1, **QUIET, confirm=0, fault=fault, algorithm=WINOGRAD)
    x, w, b = _inputs(layer, 5)
    out = nn.conv2d(x, w, b, 1, 1, db=db)  # the direct program's best, against the reference
    np.testing.assert_allclose(out, _expected(layer, x, w, b), rtol=1e-4, atol=1e-4)


def test_without_winograds_stages_the_direct_program_is_known(tmp_path):
    db = tmp_path / "t.sqlite"
    layer = make_layer((2, 6, 6), (2, 3, 3), 1, 1)
    task = nn.route_task(layer)
    liftpy.tune(task.path, sizes=task.size_map, trials=2, db=db, function=task.function, constants=task.constants,
                repeat=1, **QUIET, confirm=0)
    database = TuningDB(db)
    assert best_in_database(database, layer, None).name == DIRECT
    database.close()


def test_a_winograd_plan_for_a_layer_it_does_not_compute_or_without_its_stages_is_refused():
    from liftpy.errors import InputError

    with pytest.raises(InputError, match=r"runs 'direct' \('winograd' computes 3x3 convolutions of stride 1,"):
        nn.plan(make_layer((4, 8, 8), (4, 3, 3), 2, 1), {}, algorithm=WINOGRAD)
    with pytest.raises(InputError, match="runs 'direct' or 'winograd'$"):
        nn.plan(make_layer((4, 8, 8), (4, 3, 3), 1, 1), {}, algorithm="auto")
    with pytest.raises(InputError, match="a configuration for each of its stages, v, u, m, conv2dWinograd"):
        nn.plan(make_layer((4, 8, 8), (4, 3, 3), 1, 1), {"v": {}}, algorithm=WINOGRAD)
