"""liftpy.nn.conv2d: PyTorch's conv2d semantics, every configuration checked against independent references."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import liftpy.nn as nn
from liftpy.errors import ConstraintError, InputError
from liftpy.nn.conv import ALGORITHMS
from liftpy.nn.layers import VGG16

from .reference import conv2d_nchw


def random_layer_arrays(rng, n, c, h, w, k, kh, kw):
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    weights = (rng.standard_normal((k, c, kh, kw)) / np.sqrt(c * kh * kw)).astype(np.float32)
    bias = rng.standard_normal(k).astype(np.float32)
    return x, weights, bias


def assert_matches(out, expected):
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-4 * scale)


@st.composite
def small_layers(draw):
    kh, kw = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    top, bottom, left, right = (draw(st.integers(0, 3)) for _ in range(4))
    h = draw(st.integers(max(1, kh - top - bottom), 20))
    w = draw(st.integers(max(1, kw - left - right), 20))
    return dict(n=draw(st.integers(1, 3)), c=draw(st.integers(1, 16)), h=h, w=w, k=draw(st.integers(1, 16)),
                kh=kh, kw=kw, stride=(draw(st.integers(1, 4)), draw(st.integers(1, 4))),
                padding=(top, bottom, left, right))


@pytest.mark.parametrize("algorithm", ["route", *ALGORITHMS])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layer=small_layers(), seed=st.integers(0, 1000))
def test_random_small_layers_with_random_configurations(algorithm, layer, seed):
    rng = np.random.default_rng(seed)
    x, w, b = random_layer_arrays(rng, layer["n"], layer["c"], layer["h"], layer["w"], layer["k"], layer["kh"], layer["kw"])
    space = nn.conv_space(input=(layer["c"], layer["h"], layer["w"]), kernels=(layer["k"], layer["kh"], layer["kw"]),
                          stride=layer["stride"], padding=layer["padding"], batch=layer["n"], algorithm=algorithm)
    configs = space.sample(20, seed=seed)
    assert configs, space.describe()
    config = configs[seed % len(configs)]
    out = nn.conv2d(x, w, b, stride=layer["stride"], padding=layer["padding"], config=config, algorithm=algorithm)
    assert_matches(out, conv2d_nchw(x, w, b, layer["stride"], layer["padding"]))


SCALED = [(name, algorithm) for name in VGG16 for algorithm in ["route", *ALGORITHMS]]


@pytest.mark.parametrize("name, algorithm", SCALED, ids=[f"{n}-{a}" for n, a in SCALED])
def test_scaled_down_vgg16_layers(name, algorithm):
    layer = VGG16[name].scaled(8, min_channels=3)  # channels, kernels and spatial sizes divided by 8
    rng = np.random.default_rng(len(name))
    x, w, b = random_layer_arrays(rng, 1, layer.channels, layer.height, layer.width, layer.kernels, 3, 3)
    expected = conv2d_nchw(x, w, b, (1, 1), (1, 1, 1, 1))
    space = nn.conv_space(layer, algorithm=algorithm)
    ran = 0
    for config in space.sample(8, seed=7):
        try:
            out = nn.conv2d(x, w, b, stride=1, padding=1, config=config, algorithm=algorithm)
        except ConstraintError:  # its work-groups exceed what the device allows the built kernel (a GPU's registers)
            continue
        assert_matches(out, expected)
        ran += 1
        if ran == 2:
            break
    assert ran == 2


@pytest.mark.slow
@pytest.mark.parametrize("name", list(VGG16))
def test_full_size_vgg16_layers(name):
    """Three random valid configurations of the default pipeline per layer at full size, the other pipelines at
    their default points (-m slow)."""
    layer = VGG16[name]
    rng = np.random.default_rng(0)
    x, w, b = random_layer_arrays(rng, 1, layer.channels, layer.height, layer.width, layer.kernels, 3, 3)
    expected = conv2d_nchw(x, w, b, (1, 1), (1, 1, 1, 1))
    for config in nn.conv_space(layer, algorithm="direct").sample(3, seed=1):
        assert_matches(nn.conv2d(x, w, b, stride=1, padding=1, config=config, algorithm="direct"), expected)
    for algorithm in set(ALGORITHMS) - {"direct"}:  # at their default points
        config = nn.default_config(nn.conv_space(layer, algorithm=algorithm), algorithm)
        assert_matches(nn.conv2d(x, w, b, stride=1, padding=1, config=config, algorithm=algorithm), expected)


@pytest.mark.slow
def test_many_private_values_per_work_item_run_in_small_work_groups():
    """512 scalar accumulators per work-item, in the four versions of a kernel reading through the padding:
    PoCL crashed (SIGSEGV) on the work-groups it was given before their size counted private memory."""
    layer = VGG16["vgg16.2"]
    rng = np.random.default_rng(5)
    x, w, b = random_layer_arrays(rng, 1, layer.channels, layer.height, layer.width, layer.kernels, 3, 3)
    config = {"σ": 32, "κ": 16, "v": 1}
    out = nn.conv2d(x, w, b, stride=1, padding=1, config=config, algorithm="direct-nocopy")
    assert_matches(out, conv2d_nchw(x, w, b, (1, 1), (1, 1, 1, 1)))


def test_default_configuration_and_pytorch_style_arguments():
    rng = np.random.default_rng(3)
    x, w, b = random_layer_arrays(rng, 2, 5, 11, 9, 6, 3, 2)
    for stride, padding, torch_padding in [(1, 1, (1, 1, 1, 1)), ((2, 1), (1, 2), (1, 1, 2, 2)),
                                           (3, (0, 2, 1, 0), (0, 2, 1, 0))]:
        out = nn.conv2d(x, w, b, stride=stride, padding=padding)
        s = stride if isinstance(stride, tuple) else (stride, stride)
        assert_matches(out, conv2d_nchw(x, w, b, s, torch_padding))
    no_bias = nn.conv2d(x, w, None, stride=1, padding=0)
    assert_matches(no_bias, conv2d_nchw(x, w, np.zeros(6, np.float32), (1, 1), (0, 0, 0, 0)))


def test_non_contiguous_arrays_are_accepted():
    rng = np.random.default_rng(4)
    x, w, b = random_layer_arrays(rng, 1, 4, 8, 8, 4, 3, 3)
    x_t = np.asfortranarray(x)
    w_view = np.ascontiguousarray(w[:, :, ::-1, :])[:, :, ::-1, :]  # a negatively strided view
    assert not w_view.flags.c_contiguous
    assert_matches(nn.conv2d(x_t, w_view, b, padding=1), conv2d_nchw(x, w, b, (1, 1), (1, 1, 1, 1)))


BAD_CALLS = [
    ("mismatched channels", dict(x=(1, 3, 8, 8), w=(4, 2, 3, 3)), {}, InputError, "expect 2 input channels, the input has 3"),
    ("kernel larger than the padded input", dict(x=(1, 2, 4, 4), w=(4, 2, 7, 7)), {"padding": 1}, InputError,
     "larger than the padded input"),
    ("negative padding", dict(x=(1, 2, 8, 8), w=(4, 2, 3, 3)), {"padding": -1}, InputError, "cannot be negative"),
    ("wrong dtype", dict(x=(1, 2, 8, 8), w=(4, 2, 3, 3), dtype=np.float64), {}, InputError, "dtype float64"),
    ("wrong rank", dict(x=(2, 8, 8), w=(4, 2, 3, 3)), {}, InputError, "must have 4 dimensions"),
    ("bias of the wrong length", dict(x=(1, 2, 8, 8), w=(4, 2, 3, 3), b=3), {}, InputError, "b must have shape (4,)"),
    ("dilated kernel larger than the padded input", dict(x=(1, 2, 6, 6), w=(4, 2, 3, 3)), {"dilation": 3}, InputError,
     "spanning 7x7 dilated"),
    ("zero dilation", dict(x=(1, 2, 8, 8), w=(4, 2, 3, 3)), {"dilation": (1, 0)}, InputError, "dilation must be at least 1"),
    ("groups not dividing the kernels", dict(x=(1, 4, 8, 8), w=(3, 2, 3, 3)), {"groups": 2}, InputError,
     "groups (2) must divide"),
    ("channels per group", dict(x=(1, 4, 8, 8), w=(4, 1, 3, 3)), {"groups": 2}, InputError,
     "expect 2 input channels (1 in each of 2 groups), the input has 4"),
    ("zero groups", dict(x=(1, 2, 8, 8), w=(4, 2, 3, 3)), {"groups": 0}, InputError, "groups must be a positive integer"),
    ("groups in a hand-written pipeline", dict(x=(1, 4, 8, 8), w=(4, 2, 3, 3)), {"groups": 2, "algorithm": "direct"},
     InputError, "has no dilation or groups"),
    ("unknown algorithm", dict(x=(1, 2, 8, 8), w=(4, 2, 3, 3)), {"algorithm": "fast"}, InputError, "unknown algorithm"),
    ("zero stride", dict(x=(1, 2, 8, 8), w=(4, 2, 3, 3)), {"stride": 0}, InputError, "stride must be at least 1"),
    ("invalid configuration", dict(x=(1, 2, 8, 8), w=(4, 2, 3, 3)),
     {"config": {"σ": 3, "κ": 3, "v": 2}, "algorithm": "direct"}, ConstraintError, "not valid"),
    ("unknown parameter", dict(x=(1, 2, 8, 8), w=(4, 2, 3, 3)), {"config": {"tile": 3}, "algorithm": "direct"},
     ConstraintError, "lacks"),
    ("configuration of the route lacking its choices", dict(x=(1, 2, 8, 8), w=(4, 2, 3, 3)),
     {"config": {"parallel": 2, "tile": 3}}, ConstraintError, "has the choices"),
    ("block of the route not dividing its level", dict(x=(1, 2, 8, 8), w=(4, 2, 3, 3)),
     {"config": {"parallel": 2, "sequential_outer": 0, "unroll": 1, "local_size": 0, "block.kernelWeights": 3,
                 "block.window": 1}}, ConstraintError, "not valid"),
]


@pytest.mark.parametrize("name, shapes, kwargs, error, message", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_calls_are_refused_clearly(name, shapes, kwargs, error, message):
    dtype = shapes.get("dtype", np.float32)
    x = np.zeros(shapes["x"], dtype)
    w = np.zeros(shapes["w"], dtype)
    b = np.zeros(shapes.get("b", shapes["w"][0]), np.float32)
    with pytest.raises(error) as info:
        nn.conv2d(x, w, b, **kwargs)
    assert message in str(info.value) + " ".join(getattr(info.value, "notes", ()))


def test_invalid_configuration_names_the_violated_constraints():
    with pytest.raises(ConstraintError) as info:
        nn.conv2d(np.zeros((1, 2, 8, 8), np.float32), np.zeros((4, 2, 3, 3), np.float32), config={"σ": 3, "κ": 3, "v": 2},
                  algorithm="direct")
    notes = " ".join(info.value.notes)
    assert "split@conv_direct.lift" in notes and "4 % κ == 0" in notes  # 3 kernels per group do not divide 4
    assert "κ % v == 0" in notes  # nor does a vector width of 2 divide 3


def test_memory_footprint_is_smaller_than_im2col():
    layer = VGG16["vgg16.2"].scaled(2)
    n, c, h, w, k = layer.batch, layer.channels, layer.height, layer.width, layer.kernels
    assert (n, c, h, w, k) == (1, 32, 112, 112, 32)
    assert (layer.kernel_height, layer.kernel_width, layer.stride, layer.padding) == (3, 3, (1, 1), (1, 1, 1, 1))
    plan = nn.plan(layer, algorithm="direct")
    # the direct pipeline's buffers: the input, the weights (regrouped, as many), the biases, the padded copy
    # of the input (NHWC) and the output, all float32; the output is as large as the input (3x3, padding 1)
    floats = {"input": n * c * h * w, "weights": k * c * 3 * 3, "biases": k, "padded": n * (h + 2) * (w + 2) * c,
              "output": n * k * h * w}
    assert {name: size for name, _, size in plan.executable.buffers} == {b: 4 * f for b, f in floats.items()}
    assert plan.memory_bytes == 4 * sum(floats.values())
    # im2col + GEMM: the input, one column of c*3*3 values per output pixel, the weights, biases and output
    im2col = 4 * (n * c * h * w + n * c * 3 * 3 * h * w + k * c * 3 * 3 + k + n * k * h * w)
    assert plan.im2col_bytes == im2col
    assert plan.memory_bytes < im2col / 3


def test_conv_space_by_name_and_by_shapes():
    by_name = nn.conv_space("vgg16.7", algorithm="direct")
    by_shape = nn.conv_space(input=(128, 112, 112), kernels=(128, 3, 3), stride=1, padding=1, algorithm="direct")
    assert [p.name for p in by_name.parameters] == [p.name for p in by_shape.parameters] == ["σ", "κ", "v"]
    assert by_name.sample(5, seed=0) == by_shape.sample(5, seed=0)
    paper = nn.conv_space("vgg16.7", algorithm="paper")
    assert [p.name for p in paper.parameters] == ["θh", "θw", "ρh", "ρw", "κ", "σ", "ω", "v"]
    assert any(c.name == "tiles cover the rows" for c in paper.constraints)


# The weights in each pipeline's layout, written from the layouts' descriptions (liftpy.nn.conv.WEIGHT_LAYOUTS,
# which the export notes quote) for OIHW w and κ kernels per group
WEIGHTS_FOR = {
    "ohwi": lambda w, κ: w.transpose(0, 2, 3, 1),
    "grouped-hwc": lambda w, κ: w.transpose(0, 2, 3, 1).reshape(w.shape[0] // κ, κ, -1).transpose(0, 2, 1),
    "grouped-chw": lambda w, κ: w.reshape(w.shape[0] // κ, κ, -1).transpose(0, 2, 1),
}

# (input C x H x W, kernels K x kh x kw, stride, padding, batch, algorithm): as the command is given them,
# an int standing for both directions (stride) or all four sides (padding)
CONV_COMMANDS = [
    pytest.param((8, 12, 10), (8, 3, 3), 1, 1, 1, None, id="default"),
    pytest.param((8, 12, 10), (8, 3, 3), 1, 1, 1, "direct", id="direct"),
    pytest.param((5, 9, 11), (6, 3, 2), (2, 1), (1, 0, 2, 1), 2, "rows-nocopy", id="rows-nocopy-batch-2-uneven"),
    pytest.param((4, 7, 8), (4, 2, 3), (1, 2), (0, 1, 1, 0), 2, "direct-chw", id="direct-chw-batch-2-uneven"),
    pytest.param((3, 8, 7), (4, 3, 3), 2, 1, 1, "derived-direct", id="derived-direct"),
]


def _run_host_script(host_dir, data_dir, inputs, output):
    """Run the host.py written in ``host_dir`` on .npy files (in ``data_dir``) of ``inputs``; its output."""
    import subprocess
    import sys

    args = []
    for name, array in inputs.items():
        np.save(data_dir / f"in-{name}.npy", np.ascontiguousarray(array, dtype=np.float32))
        args += ["--input", f"{name}={data_dir / f'in-{name}.npy'}"]
    result = subprocess.run([sys.executable, str(host_dir / "host.py"), *args, "--output", str(output),
                             "--repeat", "1"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return np.load(output)


@pytest.mark.parametrize("shape, kernels, stride, padding, batch, algorithm", CONV_COMMANDS)
def test_conv_command(tmp_path, capsys, shape, kernels, stride, padding, batch, algorithm):
    """The command runs a layer and writes its kernels and a host script; the host script, run on its own
    on inputs in the pipeline's layouts, computes the convolution."""
    import ast
    import re

    from liftpy.cli import main

    def text(value, sep):
        return str(value) if isinstance(value, int) else sep.join(map(str, value))

    out_dir = tmp_path / "out"
    arguments = ["--input", text(shape, "x"), "--kernels", text(kernels, "x"), "--stride", text(stride, "x"),
                 "--padding", text(padding, ","), "--batch", str(batch)]
    arguments += ["--algorithm", algorithm] if algorithm else []
    assert main(["conv", *arguments, "--repeat", "2", "-o", str(out_dir)]) == 0
    out = capsys.readouterr().out
    assert "GFLOP/s" in out and "im2col" in out and "of the float32 tolerance" in out
    assert (out_dir / "host.py").exists() and list(out_dir.glob("*.cl"))
    notes = (out_dir / "README.txt").read_text()  # how to feed the host script
    assert "inputs (float32 .npy)" in notes and "configuration:" in notes
    # the command prints the pipeline and configuration it chose (from a tuning database, or the default)
    chosen = re.search(r"^algorithm (\S+), configuration (\{[^}]*\}), device", out, re.M)
    assert chosen, out
    chosen_algorithm, config = chosen.group(1), ast.literal_eval(chosen.group(2))
    assert chosen_algorithm == (algorithm or "route")

    (c, h, w), (k, kh, kw) = shape, kernels
    stride = (stride, stride) if isinstance(stride, int) else stride
    padding = (padding,) * 4 if isinstance(padding, int) else padding
    rng = np.random.default_rng(11)
    x, weights, bias = random_layer_arrays(rng, batch, c, h, w, k, kh, kw)
    expected = conv2d_nchw(x, weights, bias, stride, padding)
    if chosen_algorithm == "route":  # the high-level program takes PyTorch's layouts and relays them itself
        got = _run_host_script(out_dir, tmp_path, {"input": x, "weights": weights, "biases": bias}, tmp_path / "y.npy")
        assert got.size == expected.size
        assert_matches(got.reshape(expected.shape), expected)
        return
    arranged = WEIGHTS_FOR[ALGORITHMS[chosen_algorithm].weights](weights, config.get("κ", 1))
    if chosen_algorithm in ("derived", "derived-direct"):  # listing 3's layouts, one image (H x W x C) a run
        got = np.stack([_run_host_script(out_dir, tmp_path, {"inputData": image.transpose(1, 2, 0),
                                                             "kernelsWeights": arranged, "kernelsBiases": bias},
                                         tmp_path / f"y{i}.npy")
                        for i, image in enumerate(x)])
    else:  # NCHW images; the output is N*K planes
        got = _run_host_script(out_dir, tmp_path, {"input": x, "weights": arranged, "biases": bias},
                               tmp_path / "y.npy")
        assert got.shape == (batch * k, *expected.shape[2:])
        got = got.reshape(expected.shape)
    assert_matches(got, expected)


def test_conv_command_refuses_a_bad_shape(capsys):
    from liftpy.cli import main

    assert main(["conv", "--input", "8x12", "--kernels", "8x3x3"]) == 1
    err = capsys.readouterr().err
    assert "--input" in err and "8x12" in err
