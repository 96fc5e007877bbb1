"""A builder's batch compiled as one joint OpenCL program: each candidate runs from it as from its own, and a
candidate that does not compile is charged alone."""

from pathlib import Path

import numpy as np
import pytest

from liftpy.interpreter import random_inputs
from liftpy.runtime import Executable, device_info, get_device
from liftpy.tuning import Batch, Build, LocalRunner, ProgramTask, Timing
from liftpy.tuning.builder import build_candidates
from tests import faults
from tests.reference import conv2d_nchw
from .route_configs import example_configs

PROGRAM = Path(__file__).resolve().parent.parent / "examples" / "programs" / "conv_bias_relu.lift"
SIZES = {"N": 1, "C": 8, "H": 10, "W": 12, "K": 8, "kernelHeight": 3, "kernelWidth": 3,
         "padSize": (1, 1, 1, 1), "stride": (1, 1)}


def candidates(count):
    task = ProgramTask.make(PROGRAM, SIZES).portable()
    device = device_info(get_device(None))
    space = task.space(device)
    configs = [task.complete(c) for c in [*example_configs(space), *space.sample(4 * count, seed=3)]]
    unique = list({repr(sorted(c.items())): c for c in configs}.values())[:count]
    assert len(unique) == count
    return task, device, unique


def expected(inputs):
    conv = conv2d_nchw(inputs["input"], inputs["weights"], inputs["biases"], (1, 1), (1, 1, 1, 1))
    return np.maximum(conv, 0.0)


def test_joint_sources_rename_every_program_scope_name_apart(tmp_path):
    """Two candidates defining the same user function and kernel build as one program, each running its own."""
    path = tmp_path / "scaled.lift"
    path.write_text("def scaled(x: float) : float = x * 2.0f + 1.0f\n"
                    "def twice(a: [float]_n) : [float]_n = map(x -> scaled(x), a)\n")
    task = ProgramTask.make(path, {"n": 1024}).portable()
    device = device_info(get_device(None))
    configs = [task.complete(c) for c in example_configs(task.space(device))[:2]]
    builts = build_candidates([Build(task, device, c, compile=True) for c in configs])
    joints = [b.joint for b in builts]
    assert None not in joints and joints[0].source is joints[1].source
    for i, (built, joint) in enumerate(zip(builts, joints)):
        assert joint.symbols == {"twice": f"twice__joint{i}"}
        assert f"#define uf_scaled uf_scaled__joint{i}\n" in joint.source  # the user function, renamed too
        a = np.random.default_rng(i).standard_normal(1024).astype(np.float32)
        out = Executable(built.generated, None, joint).run({"a": a}, poison=True).output
        np.testing.assert_allclose(out, a * 2 + 1, rtol=1e-6)


def test_candidates_compiled_together_run_from_the_joint_program_as_from_their_own():
    task, device, configs = candidates(3)
    builts = build_candidates([Build(task, device, c, compile=True) for c in configs])
    assert all(b.failure is None and b.joint is not None for b in builts)
    assert len({id(b.joint.source) for b in builts}) == 1  # one program for the three
    inputs = random_inputs(task.load(), task.size_map, 5, task.function)
    want = expected(inputs)
    for built in builts:
        out = Executable(built.generated, None, built.joint).run(inputs, poison=True).output
        assert np.abs(out - want).max() <= 1e-4 * (1 + np.abs(want).max())
    runner = LocalRunner()
    try:
        results = [f.result() for f in runner.run(Batch(task, tuple(builts), 7, Timing(rounds=2, min_round_ms=1)))]
    finally:
        runner.close()
    assert [r["status"] for r in results] == ["ok"] * 3


def test_a_candidate_that_does_not_compile_is_charged_alone_and_the_others_are_built_one_by_one():
    task, device, configs = candidates(6)
    broken = [faults.faulty(c) for c in configs]
    if not any(broken) or all(broken):
        pytest.fail("the fault's choice of configurations no longer mixes broken and sound ones")
    builds = [Build(task, device, c, "tests.faults:does_not_compile", compile=True) for c in configs]
    builts = build_candidates(builds)
    for built, bad in zip(builts, broken):
        if bad:
            assert built.failure["status"] == "build_error" and "liftpy_no_such_function" in built.failure["cause"]
        else:
            assert built.failure is None and built.joint is None  # the joint program failed: built alone
