"""The direct convolution (the CPU extension of the paper's space that ``examples/conv_direct.lift`` writes by
hand) derived from listing 3 by the strategy ``direct(σ, κ, v)`` of ``examples/derivations/direct.py``.

The strategy's output type-checks, evaluates to what listing 3 evaluates to for several layers and tuning
values, compiles into a padding kernel, a kernel that copies the weights grouped for vector loads
([K/κ][kh*kw*C][κ]) and a convolution kernel with σ x κ/v vector accumulators in registers that loads the weight
vectors with vload, and runs on the default OpenCL device.
"""

import re
from pathlib import Path

import numpy as np
import pytest

import liftpy
from liftpy.ir import Let
from examples.derivations.direct import direct, steps

from .test_conv_derivation import (LAYERS, all_sizes, assert_matches_reference, layer_inputs, layer_reference,
                                   layer_sizes)

pytestmark = pytest.mark.derivations

LAYER_PROGRAM = Path(__file__).resolve().parent.parent / "examples" / "conv_layer.lift"
RULE_FILE = str(LAYER_PROGRAM.parent / "derivations" / "direct.rules")  # the derivation's rules and strategy
TUNING = ("σ", "κ", "v")


@pytest.fixture(scope="module")
def layer_program():
    return liftpy.load(LAYER_PROGRAM)


@pytest.fixture(scope="module")
def derived(layer_program):
    """The derivation with every tuning value left symbolic."""
    result = direct()(layer_program)
    assert result, result
    return result.program


def output_width(layer):
    _, (h, w, c), (k, kh, kw), (sh, sw), (t, b, l, r) = layer
    return (w + l + r - kw + sw) // sw


def valid_tunings(layer):
    """(σ, κ, v) with σ dividing the output width, κ the kernels and v κ: the largest values, then smaller ones."""
    _, _, (k, _, _), _, _ = layer
    width = output_width(layer)
    found = []
    for sigma, kappa, v in ((4, 4, 4), (3, 4, 2), (2, 2, 2), (1, 2, 1), (1, 1, 1)):
        sigma = max(s for s in range(1, sigma + 1) if width % s == 0)
        kappa = max(q for q in range(1, kappa + 1) if k % q == 0)
        v = max(u for u in range(1, v + 1) if kappa % u == 0)
        tuning = dict(zip(TUNING, (sigma, kappa, v)))
        if tuning not in found:
            found.append(tuning)
    return found[:3]


# ------------------------------------------------------------------------------------------------ the strategy
def test_the_strategy_is_a_composition_of_named_rules(layer_program, derived):
    result = direct()(layer_program)
    rules_used = [s.rule for s in result.steps]
    expected_order = ["inlineLet", "splitJoin", "groupJoin", "mapViewFission", "mapMapInterchange",
                      "reduceBlockBias", "vectorAccumulators", "zipGroupView", "mapGlb", "reduceSeq",
                      "privateAccumulators", "storeGlobalBlock", "mapSeqUnroll", "copyPadded", "bindVal",
                      "copyGroups", "bindVal"]
    positions = [rules_used.index(r, rules_used.index(expected_order[i - 1]) if i else 0)
                 for i, r in enumerate(expected_order)]
    assert positions == sorted(positions)
    assert len(steps()) == len({what for what, _ in steps()})  # every step named once
    assert set(derived.tuning_params) == set(TUNING)
    liftpy.typecheck(derived)  # symbolically, as derived


def test_the_derived_program_is_low_level(derived):
    from liftpy.ir import Prim, walk
    from liftpy.rewrite.strategies import is_compute_map

    body = derived.main.body
    # three stages: the padding, the grouped weights, the convolution
    assert isinstance(body, Let) and isinstance(body.body, Let) and not isinstance(body.body.body, Let)
    padding, weights, conv = ("".join(liftpy.pretty(e).split()) for e in (body.value, body.body.value, body.body.body))
    assert "mapGlb" in padding and "pad(" in padding and "toGlobal(id)" in padding
    assert "mapGlb(1," in weights and "mapGlb(0,toGlobal(id)" in weights and "split(κ,kernelsWeights)" in weights
    assert "transpose(map(" in weights and "pad(" not in weights
    assert f"zip(map(split(κ),{body.body.pattern.name})" in conv  # the convolution reads the grouped copy
    for piece in ("mapGlb(2,", "mapGlb(1,", "mapGlb(0,", "reduceSeq(", "toPrivate(mapSeqUnroll(mapSeqUnroll(id))",
                  "asVector(v,", "mapSeqUnroll(mapSeqUnroll(toGlobal(id))", "split(σ,", "split(κ,", "a+x*w"):
        assert piece in conv, piece
    high_level = [n for n in walk(body) if is_compute_map(n) or isinstance(n, Prim) and n.name == "reduce"]
    assert high_level == []


# ------------------------------------------------------------------------------------------------ interpreter
@pytest.mark.parametrize("layer", LAYERS, ids=[layer[0] for layer in LAYERS])
def test_the_derived_program_means_listing_3(derived, layer_program, layer):
    inputs = layer_inputs(layer, seed=1)
    expected = liftpy.evaluate(layer_program, inputs, layer_sizes(layer))
    reference = layer_reference(layer, inputs)  # tests/reference.py, independent of liftpy
    assert_matches_reference(expected, reference)
    tunings = valid_tunings(layer)
    assert len(tunings) >= 2
    for tuning in tunings:
        got = liftpy.evaluate(derived, inputs, {**layer_sizes(layer), **tuning})
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4, err_msg=str(tuning))  # meaning kept
        assert_matches_reference(got, reference, str(tuning))


def test_invalid_tuning_values_are_refused(derived):
    layer = LAYERS[0]  # output width 6, 4 kernels
    for bad in ({"σ": 4, "κ": 4, "v": 4}, {"σ": 2, "κ": 3, "v": 1}, {"σ": 2, "κ": 4, "v": 3}):
        with pytest.raises(liftpy.LiftError):
            liftpy.evaluate(derived, layer_inputs(layer, 0), {**layer_sizes(layer), **bad})


# ------------------------------------------------------------------------------------------------ OpenCL
ON_DEVICE = [(LAYERS[0], (2, 4, 4)), (LAYERS[2], (4, 2, 2)), (LAYERS[3], (7, 3, 1))]


@pytest.mark.parametrize("layer, tuning", ON_DEVICE, ids=[f"{layer[0]}, {t}" for layer, t in ON_DEVICE])
def test_the_derived_pipeline_runs_on_opencl(layer_program, layer, tuning):
    sigma, kappa, v = tuning
    assert output_width(layer) % sigma == 0 and layer[2][0] % kappa == 0 and kappa % v == 0
    result = direct(sigma, kappa, v)(layer_program)  # every value given, as the tuner would
    assert result and not result.program.tuning_params
    executable = liftpy.compile(result.program, all_sizes(layer, {}))
    kernels = executable.generated.kernels
    assert len(kernels) == 3  # the padding, the grouped weights, the convolution
    padding, weights, conv = (k.source for k in kernels)
    assert "0.0f" in padding and "get_global_id" in padding
    assert "kernelsWeights[" in weights and "get_global_id(1)" in weights and "get_global_id(0)" in weights
    grouped = re.search(r"global float\* restrict (\w+)\) \{", weights).group(1)  # the copy's buffer
    for d in (2, 1, 0):
        assert f"get_global_id({d});  // mapGlb({d})" in conv
    # σ x κ/v vector accumulators, registers (the loops over them unrolled), initialised from the biases
    vector = f"float{v}" if v > 1 else "float"
    count = sigma * kappa // v
    assert re.search(rf"\b{vector} acc_0, .*acc_{count - 1};", conv) and f"acc_{count}" not in conv
    # one loop over the window's elements, split into a nest over its dimensions: no division in the index
    assert "acc[" not in conv and 1 <= conv.count("for (") <= 3
    assert all("/" not in i and "%" not in i for i in re.findall(r"stage\[([^]]*)\]", conv))
    assert re.search(r"acc_0 = (vload\d\(0, )?kernelsBiases", conv)
    assert re.search(rf"acc_{count - 1} = \(acc_{count - 1} \+ \(stage\[[^]]*\] \* ", conv)  # acc + x * w, x scalar
    assert "kernelsWeights" not in conv  # only the grouped copy is read
    if v > 1:  # the weight vectors loaded from the grouped copy, not gathered element by element
        assert f"vload{v}(0, {grouped} + " in conv and f"(({vector})(" not in conv
    inputs = layer_inputs(layer, seed=2)
    out = executable.run(inputs).output
    expected = liftpy.evaluate(layer_program, inputs, layer_sizes(layer))
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    assert_matches_reference(out, layer_reference(layer, inputs))  # the kernels compute the convolution


def test_the_command_line_runs_the_strategy(capsys):
    from liftpy.cli import main

    assert main(["rewrite", str(LAYER_PROGRAM), "--rule-file", RULE_FILE, "--strategy", "direct(4, 8, 4)"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("// rewritten by: inlineLet") and "reduceBlockBias" in out and "vectorAccumulators(4)" in out
    program = liftpy.parse(out)
    assert not program.tuning_params and "asVector(4" in out and "split(8" in out
    assert main(["rewrite", str(LAYER_PROGRAM), "--rule-file", RULE_FILE, "--strategy", "direct(?, 8)"]) == 0
    assert set(liftpy.parse(capsys.readouterr().out).tuning_params) == {"σ", "v"}
