"""Prepared layers: nn.Conv2d compiles once, uploads its weights once, and is called with numpy arrays."""

import numpy as np
import pytest

import liftpy.nn as nn
from liftpy.errors import InputError

from .reference import conv2d_nchw
from .route_configs import example_config


def data(seed, n, c, h, w, k, kh, kw, bias=True):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    weights = rng.standard_normal((k, c, kh, kw)).astype(np.float32)
    b = rng.standard_normal(k).astype(np.float32) if bias else None
    return x, weights, b


def close(y, expected):
    np.testing.assert_allclose(y, expected, rtol=0, atol=1e-4 * max(1.0, float(np.abs(expected).max())))


@pytest.mark.parametrize("shape, stride, padding, bias", [
    ((1, 8, 12, 12, 8, 3, 3), 1, 1, True),
    ((2, 5, 11, 9, 12, 3, 3), 2, (1, 0, 2, 1), True),
    ((1, 4, 10, 10, 16, 1, 1), 1, 0, False),
    ((2, 3, 13, 13, 6, 5, 3), (1, 2), (2, 1), True),
])
def test_a_prepared_layer_matches_the_reference_call_after_call(shape, stride, padding, bias):
    x, w, b = data(0, *shape, bias=bias)
    layer = nn.Conv2d(w, b, stride, padding)
    strides = (stride, stride) if isinstance(stride, int) else stride
    pads = {1: (1, 1, 1, 1), 0: (0, 0, 0, 0), (2, 1): (2, 2, 1, 1)}.get(padding, padding)
    zeros = np.zeros(w.shape[0], np.float32)
    for seed in range(3):  # new images each call, into the same prepared layer
        images = x if seed == 0 else data(seed, *shape)[0]
        close(layer(images), conv2d_nchw(images, w, b if bias else zeros, strides, pads))


def test_weights_are_relaid_once_and_outputs_are_not_shared():
    x, w, b = data(1, 1, 8, 12, 12, 8, 3, 3)
    relaid = example_config(nn.conv_space(input=(8, 12, 12), kernels=(8, 3, 3), padding=1))
    assert relaid["vector_outer"] == 2  # vectors of kernels: the weights relaid...
    layer = nn.Conv2d(w, b, 1, 1, input_shape=x.shape, config=relaid)
    expected = conv2d_nchw(x, w, b, (1, 1), (1, 1, 1, 1))
    w[...] = 0  # the layer keeps its own copy of the weights
    first = layer(x)
    second = layer(2 * x)
    close(first, expected)  # the second call did not write into the first call's output
    close(second, 2 * expected - b[None, :, None, None])
    assert first is not second and not np.shares_memory(first, second)
    (bound,) = layer._bound.values()
    assert bound.plan.config["vector_outer"] == 2 and bound.program.hoisted
    assert not set(bound.program.hoisted) & set(layer.last_run.stage_ms)  # ...once, when the layer was prepared


def test_last_run_reports_the_whole_call_beside_the_kernels():
    x, w, b = data(2, 1, 8, 12, 12, 8, 3, 3)
    layer = nn.Conv2d(w, b, 1, 1)
    assert layer.last_run is None
    layer(x)
    first = layer.last_run
    assert first.max_error is not None and first.max_error <= 1  # the first call is checked
    layer(x)
    run = layer.last_run
    assert run.max_error is None and run.kernel_ms > 0 and run.call_ms >= run.kernel_ms
    # the kernels' time is their span: from the first's start to the last's end, the waits between them included
    import pyopencl as cl

    events, info = run.times._runs[-1], cl.profiling_info
    assert len(events) == len(run.stage_ms) >= 2 and len(run.runs_ms) == 1
    span = (events[-1].get_profiling_info(info.END) - events[0].get_profiling_info(info.START)) * 1e-6
    assert run.kernel_ms == pytest.approx(span, rel=1e-9)
    assert sum(run.stage_ms.values()) <= run.kernel_ms * (1 + 1e-9)
    assert {"parallel", "vector", "pad_copy"} <= set(run.config)
    calls = []
    for _ in range(3):  # the kernels' times are read when asked: still each call's own after later calls
        layer(x)
        calls.append(layer.last_run)
    assert len({id(call.times) for call in calls}) == 3
    assert all(0 < call.kernel_ms <= call.call_ms for call in calls)


def test_an_output_the_caller_dropped_is_reused_while_last_run_is_kept():
    """``last_run`` keeps a call's times, not its output: the next call writes into the dropped output's memory
    (calls alternating between two outputs would write twice the memory: 25.6 MB on VGG-16 layer 2)."""
    x, w, b = data(4, 1, 8, 12, 12, 8, 3, 3)
    layer = nn.Conv2d(w, b, 1, 1)
    layer(x)  # the checked first call
    y = layer(2 * x)
    address = y.ctypes.data
    del y
    again = layer(x)
    assert layer.last_run is not None and again.ctypes.data == address
    close(again, conv2d_nchw(x, w, b, (1, 1), (1, 1, 1, 1)))


def test_each_input_shape_gets_its_own_plan():
    x, w, b = data(3, 2, 4, 9, 9, 4, 3, 3)
    layer = nn.Conv2d(w, b, 1, 1)
    close(layer(x), conv2d_nchw(x, w, b, (1, 1), (1, 1, 1, 1)))
    small = x[:1, :, :7, :8]  # a view: not contiguous
    close(layer(small), conv2d_nchw(small, w, b, (1, 1), (1, 1, 1, 1)))
    assert len(layer.plans) == 2


@pytest.mark.parametrize("config, message", [
    ([1, 2], "config must be a mapping"),
    ({"σ": "a", "κ": 4, "v": 4}, "config: σ must be an integer"),
    ({"σ": 1.5, "κ": 4, "v": 4}, "config: σ must be an integer"),
])
def test_a_malformed_configuration_is_refused_by_name(config, message):
    x, w, b = data(4, 1, 4, 8, 8, 4, 3, 3)
    with pytest.raises(InputError, match=message):
        nn.Conv2d(w, b, 1, 1, config=config)
    with pytest.raises(InputError, match=message):
        nn.conv2d(x, w, b, 1, 1, config=config)


def test_inputs_that_do_not_fit_are_refused():
    x, w, b = data(5, 1, 4, 8, 8, 4, 3, 3)
    layer = nn.Conv2d(w, b, 1, 1)
    with pytest.raises(InputError, match="expect 4 input channels"):
        layer(np.zeros((1, 3, 8, 8), np.float32))
    with pytest.raises(InputError, match="float32"):
        layer(x.astype(np.float64))
    with pytest.raises(InputError, match="4 dimensions"):
        layer(x[0])
    with pytest.raises(InputError, match="b must have shape"):
        nn.Conv2d(w, b[:2])
