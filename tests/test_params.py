"""Tuning parameters: constraints from types and devices, solved and sampled; unsatisfiable requests explained."""

import itertools
import random

import numpy as np
import pytest

import liftpy
from liftpy.errors import ConstraintError
from liftpy.nn.layers import VGG16
from liftpy.device import Device
from liftpy.params import parameters, target_profiles

from .reference import conv2d_hwc
from .test_codegen import EXAMPLES, random_inputs
from .test_conv_derivation import assert_matches_reference, listing4_sums

PARTIAL = EXAMPLES / "partial_conv.lift"
UNLIMITED = Device(name="unlimited", max_work_group_size=10**9, max_work_item_sizes=(10**9, 10**9, 10**9),
                   local_mem_size=10**12, max_mem_alloc_size=10**15, private_mem_budget=10**9)


def partial_sizes(channels, size, kernels, k=3, stride=(1, 1), padding=1):
    return {"inputChannels": channels, "kernelHeight": k, "kernelWidth": k, "numKernels": kernels,
            "paddedInputHeight": size + 2 * padding, "paddedInputWidth": size + 2 * padding, "kernelStride": stride}


#: two layers in the default run (the first, 3 channels; a middle one), every layer in the slow set
@pytest.mark.parametrize("name", [n if n in ("vgg16.0", "vgg16.10") else pytest.param(n, marks=pytest.mark.slow)
                                  for n in sorted(VGG16, key=lambda n: int(n.split(".")[1]))])
def test_vgg16_samples_satisfy_constraints_and_typecheck(name):
    layer = VGG16[name]
    program = liftpy.load(PARTIAL)
    sizes = partial_sizes(layer.channels, layer.height, layer.kernels)
    space = parameters(program, sizes, device="mali-g72")
    configs = space.sample(1000, seed=0)
    assert len(configs) == 1000
    assert len({tuple(sorted(c.items())) for c in configs}) == 1000  # distinct
    for config in configs:
        assert space.check(config), config
        typed = liftpy.typecheck(program, {**sizes, **config})  # raises on a violated size constraint
        assert typed.constraints == (), (config, typed.constraints)
    # spread over the space, not the solver's first models: every parameter takes many values
    for p in space.parameters:
        assert len({c[p.name] for c in configs}) >= min(3, len(space.domains()[p.name]))


def test_sampling_is_reproducible_with_a_seed():
    space = liftpy.parameters(liftpy.load(PARTIAL), sizes=partial_sizes(64, 56, 64), device="mali-g72")
    assert space.sample(50, seed=3) == space.sample(50, seed=3)
    assert space.sample(50, seed=3) != space.sample(50, seed=4)


def test_sampled_configurations_run_and_match_the_interpreter_and_the_convolution():
    program = liftpy.load(PARTIAL)
    sizes = partial_sizes(8, 8, 8)  # a scaled-down layer: 8 channels, 8x8 (10x10 padded), 8 kernels
    space = parameters(program, sizes, device=None)  # the default OpenCL device
    configs = space.sample(200, seed=1)
    rng = random.Random(0)
    for config in rng.sample(configs, 6):
        concrete = {**sizes, **config}
        exe = liftpy.compile(program, concrete)
        inputs = random_inputs(program, concrete, seed=sum(config.values()))
        result = exe.run(inputs)
        expected = liftpy.evaluate(program, inputs, concrete)
        np.testing.assert_allclose(result.output, expected, rtol=1e-4, atol=1e-4, err_msg=str(config))
        # and against tests/reference.py: the partial sums, added up over the chunks, are the convolution
        # (no bias, no padding) of the padded input, on the windows the tiles cover
        padded, weights = inputs["paddedInput"], inputs["kernelsWeights"]
        got = listing4_sums(result.output, padded.shape, weights.shape, sizes["kernelStride"], config["θ"])
        reference = conv2d_hwc(padded, weights, np.zeros(len(weights)), sizes["kernelStride"])
        assert got.shape[1] <= reference.shape[1] and got.shape[2] <= reference.shape[2]
        assert_matches_reference(got, reference[:, : got.shape[1], : got.shape[2]], str(config))


def _brute_force(program, sizes, ranges):
    """Valid configurations found by asking the type checker itself about every point of the ranges."""
    names = list(ranges)
    valid = set()
    for values in itertools.product(*(range(lo, hi + 1) for lo, hi in ranges.values())):
        config = dict(zip(names, values))
        try:
            typed = liftpy.typecheck(program, {**sizes, **config})
        except liftpy.LiftError:
            continue
        if config.get("v", 1) in (1, 2, 4, 8, 16) and not typed.constraints:
            valid.add(tuple(values))
    return valid


SMALL = """
param tile, width, step, v
def f(xs: [float]_n) =
  join(map(chunk -> map(w -> reduce(0.0f, (a, x) -> a + dot(x, x), asVector(v, w)), slide(width, step, chunk)),
           split(tile, xs)))
"""


def test_exhaustive_enumeration_agrees_with_brute_force():
    program = liftpy.parse(SMALL)
    sizes = {"n": 24}
    ranges = {"tile": (1, 26), "width": (1, 13), "step": (1, 5), "v": (1, 5)}
    space = parameters(program, sizes, device=UNLIMITED, ranges=ranges)
    enumerated = {tuple(c[n] for n in ranges) for c in space.enumerate()}
    expected = _brute_force(program, sizes, ranges)
    assert enumerated == expected
    assert space.count().exact and space.count().value == len(expected) > 50


@pytest.mark.slow
def test_exhaustive_enumeration_agrees_with_brute_force_on_the_partial_convolution():
    program = liftpy.load(PARTIAL)
    sizes = partial_sizes(4, 4, 4)  # window of 36 elements, 6x6 padded input
    ranges = {"θ": (1, 7), "κ": (1, 5), "σ": (1, 10), "ω": (1, 40), "v": (1, 5)}
    space = parameters(program, sizes, device=UNLIMITED, ranges=ranges)
    enumerated = {tuple(c[n] for n in ranges) for c in space.enumerate()}
    assert enumerated == _brute_force(program, sizes, ranges)


def test_user_constraints_by_name():
    space = parameters(liftpy.load(PARTIAL), partial_sizes(16, 14, 16), device="mali-g72")
    space.require("even tiles", "θ % 2 == 0").require("wide vectors", "v >= 4")
    configs = space.sample(100)
    assert configs and all(c["θ"] % 2 == 0 and c["v"] >= 4 for c in configs)
    bad = dict(configs[0], θ=configs[0]["θ"] + 1)
    result = space.check(bad)
    assert not result and "even tiles" in {c.name for c in result.violated}
    with pytest.raises(ConstraintError, match="lacks"):
        space.check({"θ": 4})


def test_unsatisfiable_vector_width_is_explained():
    # 3 input channels: the window has 27 elements, which no vector width but 1 divides
    space = parameters(liftpy.load(PARTIAL), partial_sizes(3, 16, 8), device="mali-g72")
    space.require("want float4", "v == 4")
    assert not space.satisfiable()
    assert space.sample(10) == []
    names = {c.name for c in space.explain_unsat()}
    assert "want float4" in names
    assert any(n.startswith("asVector@") for n in names), names


def test_work_group_larger_than_the_device_is_explained():
    # one element per work-item over a window of 4608 elements needs 4608 work-items in a group
    space = parameters(liftpy.load(PARTIAL), partial_sizes(512, 14, 512), device="mali-g72")
    space.require("one element per work-item", "ω == 1")
    assert not space.satisfiable()
    names = {c.name for c in space.explain_unsat()}
    assert "one element per work-item" in names
    assert names & {"device.work_item_size.0", "device.work_group_size#2", "device.work_group_size"}, names


def test_sequential_work_item_maps_are_not_a_nest():
    """A mapLcl whose data is computed by another mapLcl of the same work-group (a tile staged in local
    memory, then read transposed) needs the larger of the two, not their product."""
    program = liftpy.parse("""
param t
def transposeTiles(xs: [[float]_n]_m) =
  mapWrg(0)(tile -> mapLcl(0)(toGlobal(id), join(transpose(split(t, toLocal(mapLcl(0)(id), join(tile)))))),
    split(t, xs))
""")
    limits = Device(name="small", max_work_group_size=256, max_work_item_sizes=(256, 256, 256), local_mem_size=32768,
                    max_mem_alloc_size=2**30)
    space = parameters(program, {"n": 64, "m": 8}, device=limits)
    groups = [c for c in space.constraints if c.name.startswith("device.work_group_size")]
    assert groups and all("64*t" in str(c) and "4096" not in str(c) for c in groups), [str(c) for c in groups]
    assert sorted(c["t"] for c in space.sample(100)) == [1, 2, 4]  # 64*t work-items: at most 256


def test_target_profiles_are_shipped():
    profiles = target_profiles()
    assert {"mali-g72", "pocl-cpu", "nvidia-gtx1080"} <= set(profiles)
    assert profiles["mali-g72"].max_work_group_size == 384
    small = parameters(liftpy.load(PARTIAL), partial_sizes(64, 56, 64), device="mali-g72").count()
    large = parameters(liftpy.load(PARTIAL), partial_sizes(64, 56, 64), device="pocl-cpu").count()
    assert small.value < large.value  # the phone GPU allows fewer configurations


def test_specialised_program_compiles_to_concrete_types():
    program = liftpy.load(PARTIAL)
    sizes = partial_sizes(8, 6, 8)
    space = parameters(program, sizes, device=UNLIMITED)
    config = space.sample(1, seed=5)[0]
    concrete = space.specialize(config)
    assert concrete.tuning_params == ()
    assert not liftpy.typecheck(concrete).main_type.result.size_names()
    with pytest.raises(ConstraintError, match="invalid configuration"):
        space.specialize(dict(config, κ=3))


def test_params_command(capsys):
    from liftpy.cli import main

    args = ["params", str(PARTIAL), "--target", "mali-g72", "--sample", "3"]
    for k, v in partial_sizes(16, 14, 16).items():
        args += ["--size", f"{k}={','.join(map(str, v)) if isinstance(v, tuple) else v}"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "valid configurations:" in out and "sample:" in out and "split@partial_conv.lift" in out
    assert main(args + ["--require", "impossible:v == 3"]) == 1
    assert "conflicting constraints" in capsys.readouterr().out
