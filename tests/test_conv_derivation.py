"""Issue 6: the paper's convolution pipeline derived from its listing 3 by the strategy ``convolution`` of
``examples/derivations/convolution.py`` (a composition of named rules, the catalogue's and the derivation's own).

The strategy's output type-checks, evaluates to what listing 3 (``examples/conv_layer.lift``) evaluates to for
several layers and tuning values, compiles into the three kernels of section 4.2 and runs on the default
OpenCL device; its partial convolution computes exactly what the hand-transcribed listing 4
(``examples/partial_conv.lift``) computes.
"""

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

import liftpy
from liftpy.ir import Let, Var
from examples.derivations.convolution import convolution, steps

from .reference import conv2d_hwc

pytestmark = pytest.mark.derivations

TUNING = ("θ", "ρh", "ρw", "κ", "σ", "ω", "v")


EXAMPLES = Path(__file__).parent.parent / "examples"


@pytest.fixture(scope="module")
def layer_program():
    return liftpy.load(EXAMPLES / "conv_layer.lift")


@pytest.fixture(scope="module")
def derived(layer_program):
    """The derivation with every tuning value left symbolic: the tuner's view of the program."""
    result = convolution()(layer_program)
    assert result, result
    return result.program


# ------------------------------------------------------------------------------------------------ layers
# (name, input H x W x C, kernels K x kh x kw, stride, padding (top, bottom, left, right))
LAYERS = [
    ("3x3 stride 1 pad 1", (6, 6, 4), (4, 3, 3), (1, 1), (1, 1, 1, 1)),
    ("non-square input", (5, 9, 2), (2, 3, 3), (1, 1), (1, 1, 1, 1)),
    ("stride 2", (7, 7, 2), (4, 3, 3), (2, 2), (1, 1, 1, 1)),
    ("rectangular kernel", (6, 7, 2), (3, 2, 3), (1, 1), (0, 1, 1, 1)),
    ("one input channel", (6, 6, 1), (2, 3, 3), (1, 1), (1, 1, 1, 1)),
]


def valid_tunings(layer, how_many=2):
    """Tuning values for which the derived program's constraints hold (the tuner's job, done by brute force):
    the tiles cover the padded input (ρ), the vectors and chunks divide the window, σ divides the windows of a
    tile, κ the kernels. Varied: the first has the largest vectors, the next the smallest tiles..."""
    _, (h, w, c), (k, kh, kw), (sh, sw), (t, b, l, r) = layer
    window = c * kh * kw
    found = []
    for v in (4, 2, 1):
        for omega in sorted({v * m for m in range(1, window // v + 1)}, reverse=True):
            if window % omega or omega % v or omega == window:
                continue
            for theta in range(max(kh, kw) + 1, 9):
                if (theta - kh) % sh or (theta - kw) % sw:
                    continue
                step_h, step_w = theta - kh + sh, theta - kw + sw
                rho_h = -(h + t + b - kh + sh) % step_h
                rho_w = -(w + l + r - kw + sw) % step_w
                per_tile = ((theta - kh) // sh + 1) * ((theta - kw) // sw + 1)
                sigma = max(s for s in (1, 2, 3, 4) if per_tile % s == 0)
                kappa = max(q for q in (1, 2, 4) if k % q == 0)
                found.append(dict(zip(TUNING, (theta, rho_h, rho_w, kappa, sigma, omega, v))))
                break
            if len(found) >= how_many:
                return found
    return found


def layer_inputs(layer, seed):
    _, (h, w, c), (k, kh, kw), _, _ = layer
    rng = np.random.default_rng(seed)
    return {
        "inputData": rng.standard_normal((h, w, c)).astype(np.float32),
        "kernelsWeights": rng.standard_normal((k, kh, kw, c)).astype(np.float32),
        "kernelsBiases": rng.standard_normal(k).astype(np.float32),
    }


def layer_sizes(layer):
    _, (h, w, c), (k, kh, kw), stride, padding = layer
    return {"padSize": padding, "kernelStride": stride}


def layer_reference(layer, inputs, padding=None):
    """The layer's convolution by tests/reference.py (float64, K x outH x outW), independent of liftpy;
    ``padding`` overrides the layer's (top, bottom, left, right)."""
    _, _, _, stride, layer_padding = layer
    return conv2d_hwc(inputs["inputData"], inputs["kernelsWeights"], inputs["kernelsBiases"], stride,
                      layer_padding if padding is None else padding)


def assert_matches_reference(got, reference, what=""):
    """A float32 result against a float64 reference, within a tolerance relative to the largest magnitude."""
    assert got.shape == reference.shape, (got.shape, reference.shape)
    np.testing.assert_allclose(got, reference, rtol=0, atol=1e-4 * max(1.0, float(np.abs(reference).max())),
                               err_msg=what)


def listing4_sums(partial, padded_shape, kernels_shape, stride, theta):
    """Listing 4's partial sums ([tiles][kernel groups][κ][window groups][σ][chunks]) added up over the chunks
    and laid out as a convolution's K x rows x columns: the tiles are the padded input's tile rows x tile
    columns (step θ - kernel + stride), the windows of a tile its window rows x window columns, row-major."""
    (height, width), (kernels, kh, kw), (sh, sw) = padded_shape[:2], kernels_shape[:3], stride
    tiles_h, tiles_w = (height - theta) // (theta - kh + sh) + 1, (width - theta) // (theta - kw + sw) + 1
    windows_h, windows_w = (theta - kh) // sh + 1, (theta - kw) // sw + 1
    tiles, groups, kappa, window_groups, sigma, _ = partial.shape
    assert (tiles, groups * kappa, window_groups * sigma) == (tiles_h * tiles_w, kernels, windows_h * windows_w)
    sums = partial.astype(np.float64).sum(axis=-1).reshape(tiles_h, tiles_w, kernels, windows_h, windows_w)
    return sums.transpose(2, 0, 3, 1, 4).reshape(kernels, tiles_h * windows_h, tiles_w * windows_w)


def all_sizes(layer, tuning):
    _, (h, w, c), (k, kh, kw), _, _ = layer
    return {**layer_sizes(layer), **tuning, "inputHeight": h, "inputWidth": w, "inputChannels": c,
            "numKernels": k, "kernelHeight": kh, "kernelWidth": kw}


# ------------------------------------------------------------------------------------------------ the strategy
def test_the_strategy_is_a_composition_of_named_rules(derived, layer_program):
    result = convolution()(layer_program)
    rules_used = [s.rule for s in result.steps]
    # the paper's steps, in order: optimisational padding, vectors, coalescing, chunks, the two stages, tiling,
    # groups of windows and kernels, chunks outermost, private accumulators, lowering, the let, padding kernel
    expected_order = ["padOptimisational", "pad2DPad2D", "dotBuiltin", "coalesceChunks", "partialReduce",
                      "reduceFission", "cropMap2D", "tileMap2D", "bindVal", "splitJoin", "mapMapInterchange",
                      "chunkInterchange", "reduceBlock", "mapWrg", "mapLcl", "letPrivate", "copyPadded", "bindVal"]
    positions = [rules_used.index(r, rules_used.index(expected_order[i - 1]) if i else 0)
                 for i, r in enumerate(expected_order)]
    assert positions == sorted(positions)
    assert len(steps()) == len({what for what, _ in steps()})  # every step named once
    # the tuning parameters of the paper, left to the tuner
    assert set(derived.tuning_params) == set(TUNING)
    liftpy.typecheck(derived)  # (a) symbolically, as derived


def test_the_derived_program_is_low_level(derived):
    text = liftpy.pretty(derived)
    body = derived.main.body
    # three stages: padding, partial convolution, sums
    assert isinstance(body, Let) and isinstance(body.body, Let)
    padding, partial, sums = body.value, body.body.value, body.body.body
    assert "mapGlb" in liftpy.pretty(padding) and "pad(" in liftpy.pretty(padding)
    p = liftpy.pretty(partial)
    for piece in ("mapWrg(1", "mapWrg(0", "mapLcl(1", "mapLcl(0", "reduceSeq(", "toPrivate(id, 0.0f)",
                  "dot(", "asVector(v", "reorder(stride(", "mapSeq(toPrivate(id), ", "toGlobal(id)"):
        assert piece in p, piece
    s = liftpy.pretty(sums)
    assert "mapGlb(1" in s and "mapGlb(0" in s and "reduceSeq(toPrivate(id, y._2)" in s
    from liftpy.ir import Prim, walk
    from liftpy.rewrite.strategies import is_compute_map

    high_level = [n for n in walk(body) if is_compute_map(n) or isinstance(n, Prim) and n.name == "reduce"]
    assert high_level == [] and "reduce(" not in text.replace("reduceSeq(", "")  # only views remain high level


# ------------------------------------------------------------------------------------------------ interpreter
@pytest.mark.parametrize("layer", LAYERS, ids=[layer[0] for layer in LAYERS])
def test_the_derived_program_means_listing_3(derived, layer_program, layer):
    inputs = layer_inputs(layer, seed=1)
    expected = liftpy.evaluate(layer_program, inputs, layer_sizes(layer))
    reference = layer_reference(layer, inputs)
    assert_matches_reference(expected, reference)
    tunings = valid_tunings(layer)
    assert len(tunings) == 2
    for tuning in tunings:
        got = liftpy.evaluate(derived, inputs, {**layer_sizes(layer), **tuning})
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4, err_msg=str(tuning))
        assert_matches_reference(got, reference, str(tuning))


def test_invalid_tuning_values_are_refused(derived):
    layer = LAYERS[0]
    tuning = dict(valid_tunings(layer)[0])
    tuning["ρh"] += 1  # the tiles no longer cover the padded input
    with pytest.raises(liftpy.LiftError, match="tileMap2D"):
        liftpy.evaluate(derived, layer_inputs(layer, 0), {**layer_sizes(layer), **tuning})


# ------------------------------------------------------------------------------------------------ OpenCL
ON_DEVICE = [(LAYERS[0], False), (LAYERS[2], True)]


@pytest.mark.parametrize("layer, unroll", ON_DEVICE, ids=[f"{layer[0]}{', unrolled' if u else ''}" for layer, u in ON_DEVICE])
def test_the_derived_pipeline_runs_on_opencl(layer_program, layer, unroll):
    tuning = valid_tunings(layer)[0]
    # the strategy with every value given, as the tuner would call it
    result = convolution(*(tuning[t] for t in TUNING), unroll=unroll)(layer_program)
    assert result and not result.program.tuning_params
    executable = liftpy.compile(result.program, all_sizes(layer, {}))
    kernels = executable.generated.kernels
    assert len(kernels) == 3  # padding, partial convolution, sums (+ bias, cropping as a view)
    padding, partial, sums = (k.source for k in kernels)
    # (d) the partial convolution's structure
    assert "get_group_id(1);  // mapWrg(1)" in partial and "get_group_id(0);  // mapWrg(0)" in partial
    assert "get_local_id(1);  // mapLcl(1)" in partial and "get_local_id(0);  // mapLcl(0)" in partial
    kappa, sigma, v = tuning["κ"], tuning["σ"], tuning["v"]
    if unroll:  # κ x σ private accumulators, registers once the loops are unrolled
        assert f"acc_{kappa * sigma - 1} = 0.0f;" in partial and "for (" not in partial
    else:
        assert f"float acc[{kappa * sigma}];" in partial
    if v > 1:
        assert f"vload{v}(" in partial and "dot(" in partial
        # the σ input vectors fetched once into private memory (the let)
        assert re.search(rf"float{v} \w+\[{sigma}\];", partial) or f"float{v} tmp_0, " in partial
    assert "0.0f" in padding and "get_global_id" in sums
    inputs = layer_inputs(layer, seed=2)
    out = executable.run(inputs).output
    expected = liftpy.evaluate(layer_program, inputs, layer_sizes(layer))
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    assert_matches_reference(out, layer_reference(layer, inputs))  # the pipeline computes the convolution


# ------------------------------------------------------------------------------------------------ listing 4
def _partial_stage(program):
    """The derived program cut after its partial convolution: its result is the partial sums."""
    f = program.main
    pad, partial = f.body, f.body.body
    body = Let(pad.pattern, pad.value, Let(partial.pattern, partial.value, Var(partial.pattern.name)))
    return dataclasses.replace(program, functions=(dataclasses.replace(f, body=body, result=None),))


def test_the_derived_partial_convolution_is_listing_4(derived, examples_dir):
    """The hand-transcribed listing 4 and the derived partial convolution compute the same partial sums,
    chunk by chunk (same tiles, kernel groups, windows, chunks and coalescing order)."""
    layer = ("3x3, 7 x 9 x 4", (7, 9, 4), (3, 3, 3), (1, 1), (1, 1, 1, 1))
    tuning = dict(zip(TUNING, (5, 2, 0, 3, 3, 6, 2)))
    inputs = layer_inputs(layer, seed=3)
    mine = liftpy.evaluate(_partial_stage(derived), inputs, {**layer_sizes(layer), **tuning})
    padded = np.pad(inputs["inputData"], ((1, 1 + tuning["ρh"]), (1, 1 + tuning["ρw"]), (0, 0)))
    listing4 = liftpy.evaluate(liftpy.load(examples_dir / "partial_conv.lift"),
                               {"kernelsWeights": inputs["kernelsWeights"], "paddedInput": padded},
                               {"kernelStride": (1, 1), **{k: tuning[k] for k in ("θ", "κ", "σ", "ω", "v")}})
    # listing 4: [tiles][kernel groups][κ][window groups][σ][chunks]; derived: [tile rows][tile columns]
    # [window rows][window columns][kernels][chunks]
    tiles, groups, kappa, wgroups, sigma, chunks = listing4.shape
    as_derived = listing4.reshape(tiles, groups * kappa, wgroups * sigma, chunks).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(mine.reshape(as_derived.shape), as_derived, rtol=1e-5, atol=1e-5)
    # and the sums of both are the convolution without the bias of the input padded by the layer and by ρ (the
    # tiles cover it: 3 x 3 tiles of 3 x 3 windows, 9 x 9 where the layer's output is its 7 x 9 corner)
    assert mine.shape[:2] == (3, 3) and mine.shape[-1] == chunks
    no_bias = {**inputs, "kernelsBiases": np.zeros(3, np.float32)}
    reference = layer_reference(layer, no_bias, padding=(1, 1 + tuning["ρh"], 1, 1 + tuning["ρw"]))
    assert reference.shape == (3, 9, 9)
    assert_matches_reference(listing4_sums(listing4, padded.shape, (3, 3, 3), (1, 1), tuning["θ"]), reference)
    # the derived sums directly: tile rows, tile columns, window rows, window columns (row-major), kernels
    sums = mine.astype(np.float64).sum(axis=-1).reshape(3, 3, 3, 3, 3)
    derived_output = sums.transpose(4, 0, 2, 1, 3).reshape(reference.shape)
    assert_matches_reference(derived_output, reference)
    assert_matches_reference(derived_output[:, :7, :9], layer_reference(layer, no_bias))


def test_the_command_line_runs_the_strategy(examples_dir, capsys):
    from liftpy.cli import main

    rule_file = str(examples_dir / "derivations" / "convolution.rules")  # the derivation's rules and strategy
    assert main(["rewrite", str(examples_dir / "conv_layer.lift"), "--rule-file", rule_file,
                 "--strategy", "convolution(?, ?, ?, 2, ?, 4, 2)"]) == 0
    out = capsys.readouterr().out
    assert "tileMap2D(θ, θ)" in out and "reduceBlock" in out and "mapWrg(1," in out
    assert out.startswith("// rewritten by: inlineLet")
    program = liftpy.parse(out)
    assert set(program.tuning_params) == {"θ", "ρh", "ρw", "σ"}
