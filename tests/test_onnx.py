"""Networks from ONNX (liftpy.onnx, liftpy.nn.network): small models built with onnx.helper (tests/onnx_models.py)
run on the device and compared with ONNX Runtime's output on the same inputs; the fusions; the memory plan; the
first call's check; refusals at load."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import helper

import liftpy.onnx
from liftpy.errors import InputError, LiftError
from liftpy.nn.network import GuessProgress, MemoryPlan

from .conftest import QUIET
from .onnx_models import Builder, fire_net, residual_net

NO_DB = "/nonexistent/tuning.sqlite"  # the route's defaults: no database is read


def onnx_runtime(model, x: np.ndarray) -> np.ndarray:
    return onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]


def agrees(got: np.ndarray, expected: np.ndarray) -> bool:
    """Within float32's rounding of a network this deep: 1e-4 of the output's scale. (Each step is held to its
    own float32 error bound by the network's checked first call; this compares two float32 evaluations.)"""
    scale = float(np.abs(expected).max())
    return got.shape == expected.shape and float(np.abs(got - expected).max()) <= 1e-4 * max(scale, 1.0)


@pytest.mark.parametrize("batch", [1, 3])
def test_a_residual_network_agrees_with_onnx_runtime(batch):
    """Each residual Add a step of its own (fuse_residual=False); fused, the next test."""
    model = residual_net(batch)
    onnx.checker.check_model(model, full_check=True)
    net = liftpy.onnx.from_model(model, fuse_residual=False)
    assert [step.op for step in net.steps] == [
        "Conv+BatchNormalization+Relu", "MaxPool", "Conv+BatchNormalization+Relu", "Conv+BatchNormalization",
        "Add+Relu", "Conv+BatchNormalization+Relu", "Conv+BatchNormalization", "Conv+BatchNormalization",
        "Add+Relu", "GlobalAveragePool", "Gemm"]
    x = np.random.default_rng(batch).standard_normal((batch, 3, 12, 12)).astype(np.float32)
    prepared = net.prepare(db=NO_DB)
    y = prepared.run({"x": x})["y"]  # the checked first call
    assert prepared.checked
    assert agrees(y, onnx_runtime(model, x))
    again = prepared.run({"x": -x})["y"]  # the planned buffers, the kernels' arguments bound to them
    assert agrees(again, onnx_runtime(model, -x))
    third = prepared.run({"x": 2 * x})["y"]  # launched again as bound
    assert agrees(third, onnx_runtime(model, 2 * x))


def test_a_residual_add_fused_into_its_convolution_agrees_with_onnx_runtime():
    """By default a residual Add (and its ReLU) joins the later convolution computing one of its operands."""
    model = residual_net(2)
    net = liftpy.onnx.from_model(model)
    assert not any("(Add) runs on its own" in note for note in net.notes)
    fused = [step for step in net.steps if "Add" in step.op]
    assert [step.function for step in fused] == ["conv2dAddClip", "conv2dAddClip"]
    assert [step.op for step in fused] == ["Conv+BatchNormalization+Add+Relu"] * 2
    assert dict(fused[0].reads) == {"input": "r2", "residual": "p1"}
    x = np.random.default_rng(7).standard_normal((2, 3, 12, 12)).astype(np.float32)
    assert agrees(net.run({"x": x})["y"], onnx_runtime(model, x))


def test_a_convolution_with_a_residual_blocks_its_sums_in_registers_and_computes_what_numpy_does():
    """conv2dAddClip starts each sum from its bias plus its residual element, so the route blocks the kernels and
    the windows as a convolution's (the residual's rows carried beside the windows) and reads the weights from a
    copy with the kernels innermost (the residual is not relaid: it was, as if its images were its kernels, and no
    such configuration was valid): its register-blocked, vectorised configurations, run on poisoned buffers,
    against a float64 convolution of tests/reference.py plus the residual, clamped."""
    from liftpy.nn import operators
    from liftpy.rewrite.route.choices import RELAID

    from . import reference
    from .route_configs import example_configs

    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 8, 6, 6)).astype(np.float32)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    residual = rng.standard_normal((1, 16, 6, 6)).astype(np.float32)
    step = operators.conv("c", "Conv+Add+Relu", "x", x.shape, w, b, "y", padding=(1, 1, 1, 1), clamp=(0.0, np.inf),
                          residual="r")
    space = step.task.space()
    assert [level.name for level in space.levels] == ["kernelWeights", "window"]
    assert space.sketcher.walked_inputs("kernelWeights") == ("weights",)  # the residual's kernels: its second dim
    blocked = [c for c in example_configs(space) if c["block.kernelWeights"] > 1 and c["block.window"] > 1]
    relaid = [c for c in blocked if c["vector_outer"] == RELAID]  # the weights read from a copy, kernels innermost
    assert any(c["vector"] for c in blocked) and relaid
    expected = np.maximum(reference.conv2d_groups_nchw(x, w, b, (1, 1), (1, 1, 1, 1)) + residual, 0.0)
    inputs = {"input": x, "weights": w, "biases": b, "residual": residual, "low": np.float32(0.0),
              "high": np.float32(np.inf)}
    for config in blocked[:4] + relaid[:1]:
        exe = liftpy.compile(space.lower(config), step.task.size_map, function=step.function)
        got = exe.run(inputs, poison=True).output.reshape(expected.shape)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * float(np.abs(expected).max()))


def test_a_fused_residual_runs_winograds_program_with_the_residual_where_that_is_tuned(tmp_path):
    """A 3x3 convolution with a residual keeps Winograd's program as its alternative (the residual added in its
    last stage): with only that tuned, the network runs it, checked step by step, and agrees with ONNX Runtime."""
    from liftpy.nn.operators import WINOGRAD
    from liftpy.tuning import tune_groups

    model = residual_net(1)
    net = liftpy.onnx.from_model(model, fuse_residual=True)
    fused = next(step for step in net.steps if step.function == "conv2dAddClip")
    (algorithm, task), = fused.programs[1:]
    assert (algorithm, task.function) == (WINOGRAD, "conv2dWinogradAddClip")
    db = tmp_path / "w.sqlite"
    tune_groups([[(WINOGRAD, task)]], 8, db, repeat=1, confirm=0, **QUIET)
    prepared = net.prepare(db=db)
    assert prepared.bests[fused.task].name == WINOGRAD
    x = np.random.default_rng(5).standard_normal((1, 3, 12, 12)).astype(np.float32)
    assert agrees(prepared.run({"x": x})["y"], onnx_runtime(model, x))


def test_preparing_untuned_steps_says_how_far_their_guesses_are(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LIFTPY_CACHE", str(tmp_path / "cache"))  # no guess kept from another test
    monkeypatch.setattr(GuessProgress, "QUIET_S", 0.0)
    net = liftpy.onnx.from_model(residual_net(1))
    distinct = len({step.task for step in net.steps})
    net.prepare(db=NO_DB)
    said = capsys.readouterr().err
    assert f"{net.name}: {distinct} distinct steps have no tuned configuration" in said
    assert f"untuned steps prepared {distinct}/{distinct} in " in said and said.endswith("\n")
    monkeypatch.setattr(GuessProgress, "QUIET_S", 2.0)
    quick = GuessProgress("net", 3, "a device")  # guesses found in the cache: only the first line
    for _ in range(3):
        quick.prepared(0.1)
    said = capsys.readouterr().err
    assert "3 distinct steps have no tuned configuration on a device" in said and "prepared" not in said


def test_squeezenet_and_mobilenet_patterns_agree_with_onnx_runtime():
    model = fire_net(2)
    onnx.checker.check_model(model, full_check=True)
    net = liftpy.onnx.from_model(model)
    functions = [step.function for step in net.steps]
    assert functions == ["conv2dClip", "conv2dClip", "conv2dClip", "concat2", "maxPool2d", "conv2dClip",
                         "conv2dClip", "conv2dClip", "addClip", "scaleShiftClip", "avgPool2d", "gemmClip"]
    assert net.steps[4].shape == (2, 12, 6, 6)  # ceil mode: one window more than floor's 5
    assert any("BatchNormalization" in note for note in net.notes)
    x = np.random.default_rng(3).standard_normal((2, 3, 12, 12)).astype(np.float32)
    assert agrees(net.run({"x": x})["y"], onnx_runtime(model, x))


def test_conv_same_padding_dilation_and_three_way_concat_agree_with_onnx_runtime():
    b = Builder(5)
    a = b.conv("x", "a", 4, 4, 3, stride=2, auto_pad="SAME_UPPER")
    c = b.conv("x", "c", 4, 4, 3, stride=2, auto_pad="SAME_LOWER")
    d = b.conv("x", "d", 4, 2, 3, stride=2, pad=2, dilations=[2, 2])
    b.node("Concat", [a, c, d], "y", axis=1)
    model = b.model({"x": [1, 4, 9, 9]}, {"y": [1, 10, 5, 5]})
    net = liftpy.onnx.from_model(model)
    assert [s.function for s in net.steps] == ["conv2d", "conv2d", "conv2d", "concat2", "concat2"]
    assert net.steps[0].sizes["padSize"] == (1, 1, 1, 1) and net.steps[1].sizes["padSize"] == (1, 1, 1, 1)
    x = np.random.default_rng(4).standard_normal((1, 4, 9, 9)).astype(np.float32)
    assert agrees(net.run({"x": x})["y"], onnx_runtime(model, x))


def test_the_memory_plan_reuses_a_buffer_once_its_last_reader_has_run():
    net = liftpy.onnx.from_model(residual_net(1))
    plan, alone = MemoryPlan.make(net), MemoryPlan.make(net, reuse=False)
    assert len(alone.sizes) == len(net.steps) + 1  # the input, and one per step
    assert plan.bytes < alone.bytes
    # no buffer holds two tensors that are alive at once: a tensor is alive from its step to its last reader
    live = {}
    for index, step in enumerate(net.steps):
        live[net.root(step.output)] = [index, index]
        for _, tensor in step.reads:
            if net.root(tensor) in live:
                live[net.root(tensor)][1] = index
    for name in net.outputs:
        live[net.root(name)][1] = len(net.steps)
    spans = sorted((plan.slot[t], start, end) for t, (start, end) in live.items())
    for (slot_a, _, end_a), (slot_b, start_b, _) in zip(spans, spans[1:]):
        assert slot_a != slot_b or end_a < start_b
    assert plan.slot["x"] not in {plan.slot[t] for t in live}  # the input keeps its buffer


def concat_net(batch: int):
    """Three convolutions of one input concatenated (two concat2 steps, the first's output a piece of the
    second's), then a convolution reading the whole: pieces of 2048 and 1024 bytes a image."""
    b = Builder(11)
    a = b.node("Relu", [b.conv("x", "a", 4, 8, 3, pad=1)], "ar")
    c = b.conv("x", "c", 4, 8, 1)
    d = b.node("Relu", [b.conv("x", "d", 4, 4, 3, pad=1)], "dr")
    cat = b.node("Concat", [a, c, d], "cat", axis=1)
    b.conv(cat, "y", 20, 6, 3, pad=1)
    return b.model({"x": [batch, 4, 8, 8]}, {"y": [batch, 6, 8, 8]})


def live_bytes_overlap(net, plan) -> list:
    """Pairs of tensors alive at once whose bytes overlap in one buffer (a tensor is alive from the step that
    writes it, or the first that writes a piece of it, to its last reader; a piece and its whole are one)."""
    home = {t: MemoryPlan.home(net, t, plan.parts)[0] for t in net.shapes}
    span = {}
    for index, step in enumerate(net.steps):
        for tensor in [step.output] + [t for _, t in step.reads]:
            owner = home[tensor]
            first, _ = span.get(owner, (index, index))
            span[owner] = (min(first, index), index)
    for name in (*net.inputs, *net.outputs):
        span[home[name]] = (0 if name in net.inputs else span[home[name]][0], len(net.steps))
    regions = {owner: plan.place(net, owner) for owner in span}
    clashes = []
    for a, (slot_a, at_a, size_a) in regions.items():
        for b, (slot_b, at_b, size_b) in regions.items():
            if a < b and slot_a == slot_b and at_a < at_b + size_b and at_b < at_a + size_a:
                (s_a, e_a), (s_b, e_b) = span[a], span[b]
                if s_a <= e_b and s_b <= e_a:
                    clashes.append((a, b))
    return clashes


@pytest.mark.parametrize("batch", [1, 2])
def test_a_concatenation_of_one_image_is_written_in_place_by_its_inputs_steps(batch):
    """With one image, a concatenation's pieces lie whole in its output: their steps write there (sub-buffers)
    and the concatenation runs no kernel; with two, it runs its kernel. Both agree with ONNX Runtime, the first
    call's step-by-step check included (which reads every piece and the whole), and no two tensors alive at
    once share a byte."""
    model = concat_net(batch)
    net = liftpy.onnx.from_model(model)
    concats = [i for i, step in enumerate(net.steps) if step.function == "concat2"]
    assert len(concats) == 2
    prepared = net.prepare(db=NO_DB)
    if batch == 1:
        assert prepared.elided == frozenset(concats)
        assert all(prepared.programs[i] is None for i in concats)
        assert prepared.parts == {"ar": ("cat#1", 0), "c": ("cat#1", 2048), "cat#1": ("cat", 0), "dr": ("cat", 4096)}
        assert prepared.plan.bytes < MemoryPlan.make(net).bytes  # the pieces need no buffers of their own
    else:
        assert not prepared.elided and not prepared.parts
    assert not live_bytes_overlap(net, prepared.plan)
    x = np.random.default_rng(batch).standard_normal((batch, 4, 8, 8)).astype(np.float32)
    assert agrees(prepared.run({"x": x})["y"], onnx_runtime(model, x))
    assert prepared.checked
    assert agrees(prepared.run({"x": -x})["y"], onnx_runtime(model, -x))


def test_a_piece_the_device_cannot_align_keeps_its_concatenation_kernel(monkeypatch):
    """A sub-buffer starts at a multiple of the device's alignment: with 4096 bytes, the second piece of the
    first concatenation (at 2048) cannot be written in place, so that step runs its kernel; the second
    concatenation's pieces (at 0 and 4096) still are."""
    import liftpy.nn.network as network

    model = concat_net(1)
    net = liftpy.onnx.from_model(model)
    assert net.concat_parts(4096) == {"cat#1": ("cat", 0), "dr": ("cat", 4096)}
    monkeypatch.setattr(network, "_alignment", lambda device: 4096)
    prepared = net.prepare(db=NO_DB)
    assert [net.steps[i].output for i in prepared.elided] == ["cat"]
    assert not live_bytes_overlap(net, prepared.plan)
    x = np.random.default_rng(5).standard_normal((1, 4, 8, 8)).astype(np.float32)
    assert agrees(prepared.run({"x": x})["y"], onnx_runtime(model, x))


def test_a_network_tuned_on_runners_elsewhere_asks_no_device_here(tmp_path, monkeypatch):
    """With a runner given (a cluster's), tuning a network opens no OpenCL device on the driver, which may have
    none: every distinct task is tuned, the concatenations' too (whether they run in place is the device's)."""
    import liftpy.runtime
    from liftpy.errors import DeviceError

    from .test_tuner_parts import FakeBuilder, FakeRunner

    def no_device(spec=None):
        raise DeviceError("no OpenCL device here")

    monkeypatch.setattr(liftpy.runtime, "get_device", no_device)
    net = liftpy.onnx.from_model(concat_net(1))
    groups = net.groups()
    assert any(programs[0][1].function == "concat2" for programs, _ in groups)
    bests = net.tune(trials=len(groups), db=tmp_path / "t.sqlite", runner=FakeRunner([]), builder=FakeBuilder([]),
                     **QUIET)
    assert len(bests) == len(groups) and all(best is not None for best in bests)


def test_the_first_call_finds_a_step_computing_something_else():
    """Two steps of one task with different weights: running each with the other's program (its weights) must
    fail the checked first call, naming the step."""
    b = Builder(2)
    y = b.node("Relu", [b.conv("x", "one", 4, 4, 3, pad=1)], "r1")
    b.node("Relu", [b.conv(y, "two", 4, 4, 3, pad=1)], "y")
    net = liftpy.onnx.from_model(b.model({"x": [1, 4, 6, 6]}, {"y": [1, 4, 6, 6]}))
    assert net.steps[0].task == net.steps[1].task
    prepared = net.prepare(db=NO_DB)
    prepared.programs.reverse()
    with pytest.raises(LiftError, match=r"step one\+r1 \(Conv\+Relu, conv2dClip .*differs from its reference"):
        prepared.run({"x": np.ones((1, 4, 6, 6), np.float32)})


def test_inputs_are_checked():
    net = liftpy.onnx.from_model(residual_net(1))
    with pytest.raises(InputError, match=r"input x has shape \(1, 3, 8, 8\), the network takes \(1, 3, 12, 12\)"):
        net(np.zeros((1, 3, 8, 8), np.float32))
    with pytest.raises(InputError, match="dtype float64"):
        net(np.zeros((1, 3, 12, 12)))
    with pytest.raises(InputError, match="takes x; x not given; it has no input z"):
        net.run({"z": np.zeros(1)})


# ------------------------------------------------------------------------------------------------ refusals
def refused(model) -> str:
    with pytest.raises(InputError) as caught:
        liftpy.onnx.from_model(model)
    return str(caught.value)


def test_an_unsupported_operator_is_refused_naming_the_node():
    b = Builder()
    b.node("Sigmoid", ["x"], "y", name="Sigmoid_7")
    message = refused(b.model({"x": [1, 2]}, {"y": [1, 2]}))
    assert message.startswith("error: node 'Sigmoid_7' (Sigmoid): the operator is not supported")


@pytest.mark.parametrize("attributes, reason", [
    (dict(pads=[0, 0, 0, 0], dilations=[1, 1], auto_pad="NOTSET", kernel_shape=[3, 3], strides=[1, 1]), None),
    (dict(pads=[1, 1, 1, 1], kernel_shape=[2, 2]), "kernel_shape \\[2, 2\\] differs from the weights' 3x3"),
])
def test_conv_attributes_are_checked(attributes, reason):
    b = Builder()
    w = b.constant("w", np.ones((2, 2, 3, 3)))
    b.nodes.append(helper.make_node("Conv", ["x", w], ["y"], name="Conv_12", **attributes))
    model = b.model({"x": [1, 2, 5, 5]}, {"y": None} if reason else {"y": [1, 2, 3, 3]})
    if reason is None:
        assert liftpy.onnx.from_model(model).steps[0].function == "conv2d"
    else:
        with pytest.raises(InputError, match=r"node 'Conv_12' \(Conv\): " + reason):
            liftpy.onnx.from_model(model)


def test_weights_computed_by_the_network_and_broadcasting_are_refused():
    b = Builder()
    b.node("Conv", ["x", "x"], "y", name="conv", kernel_shape=[1, 1])
    assert refused(b.model({"x": [1, 1, 1, 1]}, {"y": [1, 1, 1, 1]})) == (
        "error: node 'conv' (Conv): its weights ('x') is computed by the network; liftpy needs it constant (an "
        "initializer or a Constant node)")
    b = Builder()
    b.node("Add", ["x", "z"], "y", name="add")
    message = refused(b.model({"x": [1, 2, 3, 3], "z": [1, 2, 1, 1]}, {"y": [1, 2, 3, 3]}))
    assert message == "error: node 'add' (Add): broadcasting [1, 2, 3, 3] with [1, 2, 1, 1] is not supported " \
                      "(liftpy adds tensors of one shape)"


def test_average_pooling_that_excludes_its_padding_is_refused():
    b = Builder()
    b.node("AveragePool", ["x"], "y", name="pool", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    assert "count_include_pad=0 with padding is not supported" in refused(b.model({"x": [1, 1, 4, 4]},
                                                                                 {"y": [1, 1, 4, 4]}))


def test_files_that_are_not_models_get_one_line(tmp_path):
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00\x01 this is not a protobuf \xff" * 10)
    with pytest.raises(InputError, match=r"junk.onnx: not an ONNX model") as caught:
        liftpy.onnx.load(junk)
    assert "\n" not in str(caught.value)
    with pytest.raises(InputError, match="no such file"):
        liftpy.onnx.load(tmp_path / "missing.onnx")
    open_batch = residual_net("N")
    path = tmp_path / "open.onnx"
    onnx.save(open_batch, path)
    with pytest.raises(InputError, match=r"input 'x' has no fixed shape: give the batch \(load\(\.\.\., batch=N\)"):
        liftpy.onnx.load(path)
    net = liftpy.onnx.load(path, batch=2)
    assert net.inputs == {"x": (2, 3, 12, 12)} and net.shapes["y"] == (2, 10)


def test_the_command_line_describes_a_model_and_refuses_a_bad_one(tmp_path):
    path = tmp_path / "fire.onnx"
    onnx.save(fire_net(1), path)
    shown = subprocess.run([sys.executable, "-m", "liftpy.cli", "onnx", str(path)], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert "12 steps (12 distinct tasks, 13 programs with Winograd's)" in shown.stdout
    bad = tmp_path / "bad.onnx"
    bad.write_text("not a model")
    failed = subprocess.run([sys.executable, "-m", "liftpy.cli", "onnx", str(bad)], capture_output=True, text=True)
    assert failed.returncode != 0 and "Traceback" not in failed.stderr
    assert failed.stderr.strip().startswith("error:") and "not an ONNX model" in failed.stderr


@pytest.mark.parametrize("opset, shape, axis", [(13, [2, 3, 10], -1), (11, [2, 3, 2, 2], 1)])
def test_softmax_agrees_with_onnx_runtime(opset, shape, axis):
    """A row's softmax computes a val (the exponentials) read whole twice: the route must not make that map a
    parallel level (each work-item then held one exponential and summed the others' unwritten ones)."""
    b = Builder()
    b.node("Softmax", ["x"], "y", name="sm", axis=axis)
    model = b.model({"x": shape}, {"y": shape}, opset=opset)
    net = liftpy.onnx.from_model(model)
    rows = 6 if opset == 13 else 2
    assert net.steps[0].sizes == {"n": rows, "m": int(np.prod(shape)) // rows}
    x = (np.random.default_rng(0).standard_normal(shape) * 4).astype(np.float32)
    assert agrees(net.run({"x": x})["y"], onnx_runtime(model, x))


def test_an_exported_network_runs_alone_and_agrees_with_onnx_runtime(tmp_path):
    """The exported kernels and host.py (numpy and pyopencl only), run in a fresh process."""
    model = fire_net(1)
    path = tmp_path / "fire.onnx"
    onnx.save(model, path)
    out = tmp_path / "exported"
    shown = subprocess.run([sys.executable, "-m", "liftpy.cli", "onnx", str(path), "--db", NO_DB, "--export",
                            str(out)], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert (out / "host.py").is_file() and (out / "step00.cl").is_file()
    x = np.random.default_rng(9).standard_normal((1, 3, 12, 12)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    ran = subprocess.run([sys.executable, str(out / "host.py"), "--input", f"x={tmp_path / 'x.npy'}", "--output",
                          str(tmp_path / "y"), "--repeat", "2"], capture_output=True, text=True, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "whole call: median" in ran.stdout
    assert agrees(np.load(tmp_path / "y" / "y.npy"), onnx_runtime(model, x))


def test_a_network_is_tuned_with_one_budget_and_then_runs_its_tuned_configurations(tmp_path):
    """liftpy onnx --tune: the distinct tasks (two identical convolutions are one) tuned through the task
    scheduler into the database; the report then runs every step's tuned configuration."""
    b = Builder(4)
    y = b.node("Relu", [b.conv("x", "one", 4, 4, 3, pad=1)], "r1")
    y = b.node("Relu", [b.conv(y, "two", 4, 4, 3, pad=1)], "r2")
    y = b.node("Flatten", [b.node("MaxPool", [y], "pool", kernel_shape=[2, 2], strides=[2, 2])], "flat", axis=1)
    b.node("Gemm", [y, b.constant("fc.w", b.rng.standard_normal((5, 36))), b.constant("fc.b", np.zeros(5))], "y",
           transB=1)
    model = b.model({"x": [1, 4, 6, 6]}, {"y": [1, 5]})
    path, db = tmp_path / "tiny.onnx", tmp_path / "tuning.sqlite"
    onnx.save(model, path)
    net = liftpy.onnx.load(path)
    assert len(net.steps) == 4 and len(net.tasks()) == 3
    # the local search: what is checked here, the one budget and the steps' configurations, is the same for any
    # search
    done = subprocess.run([sys.executable, "-m", "liftpy.cli", "onnx", str(path), "--tune", "10", "--db", str(db),
                           "--report", "--repeat", "2", "--search", "local"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "tuning tiny's 3 distinct tasks (4 programs)" in done.stderr
    assert "4 of 4 steps tuned" in done.stdout and "route default" not in done.stdout
    prepared = net.prepare(db=db)
    assert set(prepared.bests) == {task for task, _ in net.tasks()}
    # a network's steps are timed cold (as the network leaves the caches), their trials apart from a warm task's
    with sqlite3.connect(db) as connection:
        keys = {key for key, in connection.execute("SELECT DISTINCT task_key FROM trials")}
    assert {task.key for task, _ in net.tasks()} <= keys and all(key.endswith(" cold") for key in keys)
    x = np.random.default_rng(1).standard_normal((1, 4, 6, 6)).astype(np.float32)
    assert agrees(prepared.run({"x": x})["y"], onnx_runtime(model, x))


@pytest.mark.slow
@pytest.mark.parametrize("activation", [None, "Relu"])
def test_a_convolution_runs_winograds_program_where_the_database_has_it_faster(tmp_path, activation):
    """A 3x3 convolution of stride 1 has Winograd's program beside the direct one (with its clamp where it has
    an activation: programs/conv2d_winograd_clip.lift); tuned alone into the database, it is the step's best,
    compiled with its stages joined and its transforms as constants, checked and compared with ONNX Runtime."""
    from liftpy.nn.operators import WINOGRAD
    from liftpy.tuning import tune_task

    b = Builder(6)
    y = b.conv("x", "c" if activation else "y", 8, 8, 3, pad=1)
    if activation:
        b.node(activation, [y], "y")
    model = b.model({"x": [1, 8, 10, 10]}, {"y": [1, 8, 10, 10]})
    net = liftpy.onnx.from_model(model)
    (step,) = net.steps
    (algorithm, task), = [(name, task) for name, task in step.programs if name == WINOGRAD]
    assert task.function == ("conv2dWinogradClip" if activation else "conv2dWinograd")
    db = tmp_path / "tuning.sqlite"
    tune_task(task, 4, db, **QUIET)
    prepared = net.prepare(db=db)
    assert prepared.bests[step.task].name == WINOGRAD
    x = np.random.default_rng(2).standard_normal((1, 8, 10, 10)).astype(np.float32)
    assert agrees(prepared.run({"x": x})["y"], onnx_runtime(model, x))
    assert "winograd" in "\n".join(prepared.report({"x": x}, calls=1))


def test_groups_that_do_not_divide_the_kernels_are_refused_naming_the_node():
    b = Builder()
    w = b.constant("w", np.ones((3, 2, 1, 1)))
    b.nodes.append(helper.make_node("Conv", ["x", w], ["y"], name="Conv_3", kernel_shape=[1, 1], group=2))
    message = refused(b.model({"x": [1, 4, 2, 2]}, {"y": [1, 3, 2, 2]}))
    assert message.startswith("error: node 'Conv_3' (Conv): groups (2) must divide")
