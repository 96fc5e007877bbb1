"""liftpy.nn through the automatic route (its default): the high-level convolution (liftpy/nn/conv2d.lift) with
PyTorch's stride, padding, dilation and groups, every result compared with tests/reference.py (float64, written
apart from the library); the tuned configuration found in the database by nn.conv2d, liftpy conv, report and
export."""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import liftpy.nn as nn
from liftpy.cli import main
from liftpy.runtime import get_device
from liftpy.tuning import TuningDB

from . import reference
from .test_nn import _run_host_script


def _close(got, expected):
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(np.asarray(got).reshape(expected.shape), expected, rtol=0, atol=1e-4 * scale)


def _arrays(rng, n, c, h, w, k, per_group, kh, kw):
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    weights = (rng.standard_normal((k, per_group, kh, kw)) / np.sqrt(per_group * kh * kw)).astype(np.float32)
    return x, weights, rng.standard_normal(k).astype(np.float32)


@st.composite
def grouped_layers(draw):
    """Small layers with groups (depthwise among them: one channel and one kernel per group), dilations 1 to
    3, strides, uneven padding; windows that fit."""
    groups = draw(st.integers(1, 4))
    per_group, kernels_per_group = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dilation = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = tuple(draw(st.integers(0, 2)) for _ in range(4))
    span = ((kh - 1) * dilation[0] + 1, (kw - 1) * dilation[1] + 1)
    h = draw(st.integers(max(1, span[0] - padding[0] - padding[1]), 12))
    w = draw(st.integers(max(1, span[1] - padding[2] - padding[3]), 12))
    return dict(n=draw(st.integers(1, 2)), c=groups * per_group, h=h, w=w, k=groups * kernels_per_group,
                per_group=per_group, kh=kh, kw=kw, stride=(draw(st.integers(1, 3)), draw(st.integers(1, 3))),
                padding=padding, dilation=dilation, groups=groups)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layer=grouped_layers(), seed=st.integers(0, 1000))
def test_random_layers_with_dilation_and_groups(layer, seed):
    """The route's default, then a configuration sampled from the layer's route space, with and without a
    bias."""
    rng = np.random.default_rng(seed)
    L = layer
    x, w, b = _arrays(rng, L["n"], L["c"], L["h"], L["w"], L["k"], L["per_group"], L["kh"], L["kw"])
    arguments = dict(stride=L["stride"], padding=L["padding"], dilation=L["dilation"], groups=L["groups"])
    expected = reference.conv2d_groups_nchw(x, w, b, L["stride"], L["padding"], L["dilation"], L["groups"])
    _close(nn.conv2d(x, w, b, **arguments), expected)
    shape = nn.make_layer((L["c"], L["h"], L["w"]), (L["k"], L["kh"], L["kw"]), L["stride"], L["padding"], L["n"],
                          dilation=L["dilation"], groups=L["groups"])
    (config,) = nn.route_space(shape, get_device()).sample(1, seed=seed)
    no_bias = reference.conv2d_groups_nchw(x, w, None, L["stride"], L["padding"], L["dilation"], L["groups"])
    _close(nn.conv2d(x, w, None, config=config, **arguments), no_bias)


def test_a_layer_prepared_once_relays_its_weights_once():
    """A grouped, dilated layer called on three batches: its weights relaid by a kernel of the program, run
    when the layer is prepared (hoisted) and never again; every call computes the reference's answer, the
    first one checked by the layer itself."""
    rng = np.random.default_rng(2)
    x, w, b = _arrays(rng, 2, 8, 10, 9, 32, 4, 3, 3)
    layer = nn.Conv2d(w, b, stride=1, padding=2, dilation=2, groups=2)
    for _ in range(3):
        _close(layer(x), reference.conv2d_groups_nchw(x, w, b, (1, 1), (2, 2, 2, 2), (2, 2), 2))
        x = rng.standard_normal(x.shape).astype(np.float32)
    (bound,) = layer._bound.values()
    assert bound.plan.config["vector_outer"] == 2  # the weights relaid
    assert bound.program.hoisted and all(name not in bound.program.hoisted for name in layer.last_run.stage_ms)
    assert "groups=2" in repr(layer) and "dilation=(2, 2)" in repr(layer)


def test_a_layer_tuned_through_the_route_is_found_by_conv2d_report_and_export(tmp_path, capsys):
    """liftpy tune --input/--kernels/--groups/--dilation tunes the layer's program through the route; nn.conv2d
    then compiles the database's best configuration, liftpy report shows the best low-level program and
    liftpy export writes kernels whose host script computes the layer from PyTorch's layouts."""
    db = str(tmp_path / "t.sqlite")
    shape = ["--input", "4x9x8", "--kernels", "6x3x3", "--padding", "2", "--dilation", "2", "--groups", "2",
             "--db", db]
    assert main(["tune", *shape, "--trials", "4", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "4 trials" in out and "route" in out
    layer = nn.make_layer((4, 9, 8), (6, 3, 3), padding=2, dilation=2, groups=2)
    database = TuningDB(db)
    best = database.best(nn.route_task(layer))
    database.close()
    assert best is not None and best.trial.algorithm == "route"
    assert nn.plan(layer, db=db).config == nn.route_task(layer).complete(best.config)
    rng = np.random.default_rng(4)
    x, w, b = _arrays(rng, 1, 4, 9, 8, 6, 2, 3, 3)
    expected = reference.conv2d_groups_nchw(x, w, b, (1, 1), (2, 2, 2, 2), (2, 2), 2)
    _close(nn.conv2d(x, w, b, padding=2, dilation=2, groups=2, db=db), expected)

    assert main(["report", *shape, "-o", str(tmp_path)]) == 0
    report = capsys.readouterr().out
    assert "the best low-level program" in report and re.search(r"^\s+1\s+\d", report, re.M)
    other = ["--input", "4x10x8", *shape[2:]]  # another layer of the same program: a figure of its own
    assert main(["tune", *other, "--trials", "2", "--repeat", "1"]) == 0
    assert main(["report", *other, "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    assert len(list(tmp_path.glob("pareto-conv2d-*.png"))) == 2
    out_dir = tmp_path / "best"
    assert main(["export", *shape, "-o", str(out_dir)]) == 0
    assert "OIHW" in (out_dir / "README.txt").read_text()
    got = _run_host_script(out_dir, tmp_path, {"input": x, "weights": w, "biases": b}, tmp_path / "y.npy")
    _close(got, expected)


def test_the_conv_command_runs_a_dilated_grouped_layer(capsys):
    assert main(["conv", "--input", "6x11x10", "--kernels", "6x3x3", "--padding", "1", "--dilation", "1x2",
                 "--groups", "6", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "dilation 1x2, 6 groups" in out and "automatic route" in out and "of the float32 tolerance" in out


def _block_elements(config) -> int:
    """The elements of a configuration's register block (the product of its blocked levels' sizes)."""
    return int(np.prod([v for k, v in config.items() if k.startswith("block.")], dtype=np.int64))


#: the largest register block a full-size test compiles: a block of 256 kernels x 2 pixels, 512 scalar
#: accumulators unrolled, took PoCL about ten minutes to compile at VGG-16's layer 12; the route's tests at
#: small sizes run such blocks (test_route.py)
FULL_SIZE_BLOCK = 128


@pytest.mark.slow
@pytest.mark.parametrize("name", list(nn.VGG16))
def test_full_size_vgg16_layers_through_the_route(name):
    """The route's default and two sampled configurations per VGG-16 layer at full size (-m slow), of blocks
    up to FULL_SIZE_BLOCK elements."""
    layer = nn.VGG16[name]
    rng = np.random.default_rng(0)
    x, w, b = _arrays(rng, 1, layer.channels, layer.height, layer.width, layer.kernels, layer.channels, 3, 3)
    expected = reference.conv2d_nchw(x, w, b, (1, 1), (1, 1, 1, 1))
    sampled = [c for c in nn.conv_space(layer).sample(40, seed=1) if _block_elements(c) <= FULL_SIZE_BLOCK][:2]
    assert len(sampled) == 2
    for config in [None, *sampled]:
        _close(nn.conv2d(x, w, b, stride=1, padding=1, config=config), expected)
