"""The hand-written CPU convolutions of examples/ without their padding kernel, derived by the strategy
``inline_copies`` of ``examples/derivations/copies.py`` (the memory/time trade-off of the paper's figure 6).

The strategy turns the kernel that copies the padded input (``val padded``) back into the view it copies: the
rewritten program has one kernel and one buffer fewer, means what the original means, and its convolution reads
the input through the padding's conditions. The rules of ``copies.rules`` preserve meaning on generated programs
(tested in ``test_derivation_rules.py``). The other direction, the catalogue's ``relayout`` and ``copy_padding``,
is tested in ``test_copies.py``.
"""

import re
from pathlib import Path

import numpy as np
import pytest

import liftpy
from liftpy.codegen.program import generate
from liftpy.ir import Let, Prim, walk
from liftpy.nn import conv
from examples.derivations.copies import copies_a_view, inline_copies, steps

from .reference import conv2d_nchw

pytestmark = pytest.mark.derivations

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
#: the programs, and how each takes the OIHW weights w for κ kernels per work-item (as their headers say)
def _grouped_hwc(w, κ):
    return w.transpose(0, 2, 3, 1).reshape(w.shape[0] // κ, κ, -1).transpose(0, 2, 1)


def _grouped_chw(w, κ):
    return w.reshape(w.shape[0] // κ, κ, -1).transpose(0, 2, 1)


BASES = {"direct": ("conv_direct.lift", _grouped_hwc), "direct-chw": ("conv_direct_chw.lift", _grouped_chw),
         "rows": ("conv_rows.lift", _grouped_chw)}


def base_program(base):
    return liftpy.load(EXAMPLES / BASES[base][0])


def layer_sizes(layer, config):
    return dict(N=layer.batch, C=layer.channels, H=layer.height, W=layer.width, K=layer.kernels,
                stride=layer.stride, padding=layer.padding, kernel=(layer.kernel_height, layer.kernel_width),
                **config)


def layer_inputs(base, layer, config, x, w, b):
    return {"input": x, "weights": np.ascontiguousarray(BASES[base][1](w, config["κ"]), dtype=np.float32),
            "biases": b}


def _val(program, name):
    """The value of the val ``name`` of the program's body."""
    node = program.main.body
    while isinstance(node, Let):
        if list(node.pattern.names()) == [name]:
            return node.value
        node = node.body
    raise AssertionError(f"no val {name}")


# ------------------------------------------------------------------------------------------------ the strategy
@pytest.mark.parametrize("base", BASES)
def test_the_strategy_turns_the_padding_copy_into_a_view(base):
    from liftpy.rewrite.predicates import PREDICATES

    program = base_program(base)
    assert copies_a_view(_val(program, "padded"))
    result = inline_copies()(program)
    assert result, result
    rules_used = [s.rule for s in result.steps]
    assert rules_used.count("mapGlbToMap") == 3 and rules_used.count("removeToGlobal") == 1
    assert "removeMapCopy" in rules_used
    assert len(steps()) == len({what for what, _ in steps()})  # every step named once
    padded = _val(result.program, "padded")
    assert PREDICATES["view"].fn(padded) and not copies_a_view(padded)
    assert not any(isinstance(n, Prim) and n.name in ("mapGlb", "mapWrg", "toGlobal") for n in walk(padded))
    assert "pad(" in "".join(liftpy.pretty(padded).split())
    # the rest of the program is untouched
    assert result.program.main.body.body == program.main.body.body
    liftpy.typecheck(result.program)  # symbolically, as rewritten


def test_the_strategy_refuses_a_val_that_computes():
    program = liftpy.parse("""def p(xs: [[float]_m]_n) = {
        val doubled = mapGlb(1, row -> mapGlb(0, x -> toGlobal(id, x * 2.0f), row), xs);
        mapGlb(1, row -> mapGlb(0, x -> toGlobal(id, x + 1.0f), row), doubled) }""")
    assert not inline_copies("doubled")(program)
    assert not inline_copies("missing")(program)
    copied = liftpy.parse("""def p(xs: [[float]_m]_n) = {
        val copy = mapGlb(1, row -> mapGlb(0, toGlobal(id), row), xs);
        mapGlb(1, row -> mapGlb(0, x -> toGlobal(id, x + 1.0f), row), copy) }""")
    result = inline_copies("copy")(copied)
    assert result and liftpy.pretty(_val(result.program, "copy")).strip() == "xs"
    for copy in ("mapWrg(0, row -> mapLcl(0, id, row), xs)", "mapGlb(0, row -> mapSeq(x -> x, row), transpose(xs))"):
        program = liftpy.parse(f"""def p(xs: [[float]_m]_n) = {{
            val copy = {copy};
            mapGlb(1, row -> mapGlb(0, x -> toGlobal(id, x + 1.0f), row), copy) }}""")
        result = inline_copies("copy")(program)
        assert result, (copy, result)
        assert liftpy.pretty(_val(result.program, "copy")).strip() in ("xs", "transpose(xs)")


# a small layer with every kind of asymmetry: a batch of 2, a rectangular kernel, strides and padding
LAYER = conv.make_layer((3, 5, 6), (4, 3, 2), stride=(1, 2), padding=(1, 0, 2, 1), batch=2)
CONFIG = {"σ": 2, "κ": 2, "v": 2}  # valid for both pipelines (σ divides the output width 4; rows: v divides σ)


def assert_close_float32(out, expected):
    """float32 sums of a few dozen products against float64: close relative to the largest value."""
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-5 * max(1.0, float(np.abs(expected).max())))


def _layer_inputs(base, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((LAYER.batch, LAYER.channels, LAYER.height, LAYER.width)).astype(np.float32)
    w = rng.standard_normal((LAYER.kernels, LAYER.channels, LAYER.kernel_height, LAYER.kernel_width)).astype(np.float32)
    b = rng.standard_normal(LAYER.kernels).astype(np.float32)
    return layer_inputs(base, LAYER, CONFIG, x, w, b), (x, w, b)


@pytest.mark.parametrize("base", BASES)
def test_the_rewritten_pipeline_has_one_kernel_fewer(base):
    sizes = layer_sizes(LAYER, CONFIG)
    before = generate(base_program(base), sizes)
    after = generate(inline_copies()(base_program(base)).program, sizes)
    assert len(after.kernels) == len(before.kernels) - 1
    assert before.kernels[0].produces.startswith("padded")  # the padding kernel, first
    assert not any(b.name.startswith("padded") for b in after.buffers)
    removed = before.buffer(before.kernels[0].produces).bytes
    assert sum(b.bytes for b in after.buffers) == sum(b.bytes for b in before.buffers) - removed
    # the convolution reads the input itself, through the padding's conditions (0.0f outside)
    conv_source = after.kernels[-1].source
    assert "input[" in conv_source and ": 0.0f)" in conv_source


@pytest.mark.parametrize("base", BASES)
def test_the_rewritten_pipeline_means_the_original(base):
    sizes = layer_sizes(LAYER, CONFIG)
    inputs, (x, w, b) = _layer_inputs(base)
    original = liftpy.evaluate(base_program(base), inputs, sizes)
    rewritten = liftpy.evaluate(inline_copies()(base_program(base)).program, inputs, sizes)
    assert rewritten.shape == original.shape
    np.testing.assert_array_equal(rewritten, original)  # the same sums in the same order
    expected = conv2d_nchw(x, w, b, LAYER.stride, LAYER.padding)
    assert_close_float32(rewritten.reshape(expected.shape), expected)


@pytest.mark.parametrize("base", BASES)
def test_interior_work_items_read_without_conditions(base):
    """The convolution is versioned on each work-item dimension: where no window reaches the padding, the
    reads are plain loads; both versions together compute what the reference does."""
    import re

    layer = conv.make_layer((4, 9, 12), (4, 3, 3), stride=1, padding=1, batch=1)
    config = {"σ": 4, "κ": 2, "v": 2}  # three blocks per output row: the middle one is interior
    executable = liftpy.compile(inline_copies()(base_program(base)).program, layer_sizes(layer, config))
    (kernel,) = executable.generated.kernels
    source = kernel.source
    assert len(re.findall(r"// interior: no padding condition depends on gid[01]", source)) >= 2, source
    branches = source.split("// interior:")
    innermost = branches[2].split("else {")[0]  # interior rows, then interior columns
    reads = [line for line in innermost.splitlines() if "input[" in line or "vload2(0, input" in line]
    assert reads and not any("?" in line or "select(" in line for line in reads), innermost
    assert "?" in source  # the border versions still test the padding
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 4, 9, 12)).astype(np.float32)
    w = rng.standard_normal((4, 4, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    expected = conv2d_nchw(x, w, b, layer.stride, layer.padding)
    result = executable.run(layer_inputs(base, layer, config, x, w, b), poison=True)
    assert_close_float32(result.output.reshape(expected.shape), expected)


def test_the_command_line_runs_the_strategy(capsys):
    from liftpy.cli import main

    path = EXAMPLES / "conv_direct.lift"
    rule_file = str(EXAMPLES / "derivations" / "copies.rules")  # the derivation's rules and strategy
    assert main(["rewrite", str(path), "--rule-file", rule_file, "--strategy", "inline_copies"]) == 0
    out = capsys.readouterr().out
    assert "removeToGlobal" in out.splitlines()[0] and "removeMapCopy" in out.splitlines()[0]
    program = liftpy.parse(out)
    assert "toGlobal" not in liftpy.pretty(_val(program, "padded"))
