"""liftpy.nn.conv2d: PyTorch's conv2d semantics through the automatic route, every configuration checked against
independent references (tests/reference.py, float64)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import liftpy.nn as nn
from liftpy.errors import ConstraintError, InputError
from liftpy.nn.layers import VGG16

from .reference import conv2d_nchw
from .route_configs import example_config


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


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layer=small_layers(), seed=st.integers(0, 1000))
def test_random_small_layers_with_random_configurations(layer, seed):
    rng = np.random.default_rng(seed)
    x, w, b = random_layer_arrays(rng, layer["n"], layer["c"], layer["h"], layer["w"], layer["k"], layer["kh"], layer["kw"])
    space = nn.conv_space(input=(layer["c"], layer["h"], layer["w"]), kernels=(layer["k"], layer["kh"], layer["kw"]),
                          stride=layer["stride"], padding=layer["padding"], batch=layer["n"])
    configs = space.sample(20, seed=seed)
    assert configs, space.describe()
    config = configs[seed % len(configs)]
    out = nn.conv2d(x, w, b, stride=layer["stride"], padding=layer["padding"], config=config)
    assert_matches(out, conv2d_nchw(x, w, b, layer["stride"], layer["padding"]))


@pytest.mark.parametrize("name", list(VGG16))
def test_scaled_down_vgg16_layers(name):
    """The route's default and three sampled configurations of each VGG-16 layer, divided by 8."""
    layer = VGG16[name].scaled(8, min_channels=3)  # channels, kernels and spatial sizes divided by 8
    rng = np.random.default_rng(len(name))
    x, w, b = random_layer_arrays(rng, 1, layer.channels, layer.height, layer.width, layer.kernels, 3, 3)
    expected = conv2d_nchw(x, w, b, (1, 1), (1, 1, 1, 1))
    space = nn.conv_space(layer)
    ran = 0
    for config in [example_config(space), *space.sample(3, seed=7)]:
        try:
            out = nn.conv2d(x, w, b, stride=1, padding=1, config=config)
        except ConstraintError:  # its work-groups exceed what the device allows the built kernel (a GPU's registers)
            continue
        assert_matches(out, expected)
        ran += 1
    assert ran >= 2


@pytest.mark.slow
def test_many_private_values_per_work_item_run_in_small_work_groups():
    """512 scalar accumulators per work-item (16 kernels x 32 pixels, unrolled), each read through the padding
    in the versions of a kernel that reads it: PoCL crashed (SIGSEGV) on the work-groups it was given before
    their size counted private memory."""
    layer = VGG16["vgg16.2"]
    rng = np.random.default_rng(5)
    x, w, b = random_layer_arrays(rng, 1, layer.channels, layer.height, layer.width, layer.kernels, 3, 3)
    config = {**example_config(nn.conv_space(layer)), "block.kernelWeights": 16, "block.window": 32, "unroll": 1,
              "vector": 0, "vector_outer": 0, "pad_copy": 0}
    out = nn.conv2d(x, w, b, stride=1, padding=1, config=config)
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
    ("zero stride", dict(x=(1, 2, 8, 8), w=(4, 2, 3, 3)), {"stride": 0}, InputError, "stride must be at least 1"),
    ("configuration of a retired pipeline", dict(x=(1, 2, 8, 8), w=(4, 2, 3, 3)),
     {"config": {"σ": 3, "κ": 3, "v": 2}}, ConstraintError, "has the choices"),
    ("configuration not a mapping", dict(x=(1, 2, 8, 8), w=(4, 2, 3, 3)), {"config": [("parallel", 2)]}, InputError,
     "config must be a mapping"),
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
    x, w = np.zeros((1, 2, 8, 8), np.float32), np.zeros((4, 2, 3, 3), np.float32)
    config = {**example_config(nn.conv_space(input=(2, 8, 8), kernels=(4, 3, 3), padding=1)), "block.kernelWeights": 3}
    with pytest.raises(ConstraintError) as info:
        nn.conv2d(x, w, padding=1, config=config)
    message = info.value.message
    assert "not valid for layer: input 2x8x8" in message
    assert "4 % block_kernelWeights == 0" in message  # a block of 3 kernels does not divide 4


def _padded_and_relaid(config) -> tuple[bool, bool]:
    """Whether a configuration copies the padded input to memory, and relays the weights."""
    return config["pad_copy"] in (1, 2), config["vector_outer"] == 2


def test_memory_footprint_is_smaller_than_im2col_and_the_padding_copy_costs_its_size():
    """The paper's time/memory trade-off inside the route: reading through the padding view allocates the
    inputs and the output only; the padding's copy adds the padded input (channels-last or rotated, the same
    size), relaying the weights a copy of them."""
    layer = VGG16["vgg16.2"].scaled(2)
    n, c, h, w, k = layer.batch, layer.channels, layer.height, layer.width, layer.kernels
    assert (n, c, h, w, k) == (1, 32, 112, 112, 32)
    assert (layer.kernel_height, layer.kernel_width, layer.stride, layer.padding) == (3, 3, (1, 1), (1, 1, 1, 1))
    base = {"input": n * c * h * w, "weights": k * c * 3 * 3, "biases": k, "output": n * k * h * w}
    sampled = nn.conv_space(layer).sample(100, seed=0)
    kinds = {}
    for config in sampled:
        kinds.setdefault(_padded_and_relaid(config), config)
    assert set(kinds) == {(False, False), (True, False), (False, True), (True, True)}
    for (padded, relaid), config in kinds.items():
        plan = nn.plan(layer, config)
        floats = dict(base, **({"padded": n * (h + 2) * (w + 2) * c} if padded else {}),
                      **({"weightsT": k * c * 3 * 3} if relaid else {}))
        assert {name: size for name, _, size in plan.executable.buffers} == {b: 4 * f for b, f in floats.items()}
        assert plan.memory_bytes == 4 * sum(floats.values())
        # im2col + GEMM: the input, one column of c*3*3 values per output pixel, the weights, biases and output
        im2col = 4 * (n * c * h * w + n * c * 3 * 3 * h * w + k * c * 3 * 3 + k + n * k * h * w)
        assert plan.im2col_bytes == im2col
        assert plan.memory_bytes < im2col / 3


def test_conv_space_by_name_and_by_shapes():
    by_name = nn.conv_space("vgg16.7")
    by_shape = nn.conv_space(input=(128, 112, 112), kernels=(128, 3, 3), stride=1, padding=1)
    assert by_name is by_shape  # the same layer's space, built once
    assert [level.name for level in by_name.levels] == ["kernelWeights", "window"]
    grouped = nn.conv_space(input=(8, 10, 10), kernels=(8, 3, 3), padding=1, dilation=2, groups=2)
    assert grouped is not by_name and grouped.sample(5, seed=0) == grouped.sample(5, seed=0)


# (input C x H x W, kernels K x kh x kw, stride, padding, batch): as the command is given them, an int standing
# for both directions (stride) or all four sides (padding)
CONV_COMMANDS = [
    pytest.param((8, 12, 10), (8, 3, 3), 1, 1, 1, id="default"),
    pytest.param((5, 9, 11), (6, 3, 2), (2, 1), (1, 0, 2, 1), 2, id="batch-2-uneven"),
    pytest.param((4, 7, 8), (4, 2, 3), (1, 2), (0, 1, 1, 0), 2, id="batch-2-uneven-kernel"),
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


@pytest.mark.parametrize("shape, kernels, stride, padding, batch", CONV_COMMANDS)
def test_conv_command(tmp_path, capsys, shape, kernels, stride, padding, batch):
    """The command runs a layer and writes its kernels and a host script; the host script, run on its own
    on inputs in PyTorch's layouts (the program relays them itself), computes the convolution."""
    import ast
    import re

    from liftpy.cli import main

    def text(value, sep):
        return str(value) if isinstance(value, int) else sep.join(map(str, value))

    out_dir = tmp_path / "out"
    arguments = ["--input", text(shape, "x"), "--kernels", text(kernels, "x"), "--stride", text(stride, "x"),
                 "--padding", text(padding, ","), "--batch", str(batch)]
    assert main(["conv", *arguments, "--repeat", "2", "-o", str(out_dir)]) == 0
    out = capsys.readouterr().out
    assert "GFLOP/s" in out and "im2col" in out and "of the float32 tolerance" in out
    assert (out_dir / "host.py").exists() and list(out_dir.glob("*.cl"))
    notes = (out_dir / "README.txt").read_text()  # how to feed the host script
    assert "inputs (float32 .npy)" in notes and "configuration:" in notes
    # the command prints the configuration it chose (from a tuning database, or the route's default)
    chosen = re.search(r"^automatic route, configuration (\{[^}]*\}), device", out, re.M)
    assert chosen, out
    assert {"parallel", "pad_copy"} <= set(ast.literal_eval(chosen.group(1)))

    (c, h, w), (k, kh, kw) = shape, kernels
    stride = (stride, stride) if isinstance(stride, int) else stride
    padding = (padding,) * 4 if isinstance(padding, int) else padding
    rng = np.random.default_rng(11)
    x, weights, bias = random_layer_arrays(rng, batch, c, h, w, k, kh, kw)
    expected = conv2d_nchw(x, weights, bias, stride, padding)
    got = _run_host_script(out_dir, tmp_path, {"input": x, "weights": weights, "biases": bias}, tmp_path / "y.npy")
    assert got.size == expected.size
    assert_matches(got.reshape(expected.shape), expected)


def test_conv_command_refuses_a_bad_shape(capsys):
    from liftpy.cli import main

    assert main(["conv", "--input", "8x12", "--kernels", "8x3x3"]) == 1
    err = capsys.readouterr().err
    assert "--input" in err and "8x12" in err
