"""The data-movement figure of generated kernels (liftpy.codegen.traffic), against counts derived by hand."""

from pathlib import Path

import liftpy
from liftpy.codegen.traffic import Traffic, kernel_traffic

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_a_map_reads_and_writes_each_element_once_and_a_value_used_twice_is_read_once():
    n = 4096
    for body in ("a * 2.0f", "a * a"):
        exe = liftpy.compile(liftpy.parse(f"def f(x: [float]_n) = mapGlb(0)(a -> {body}, x)"), {"n": n})
        (kernel,) = exe.generated.kernels
        traffic = kernel_traffic(kernel.ir)
        assert (traffic.read, traffic.written) == (4 * n, 4 * n), body


def test_a_stencil_reads_its_window_and_weights_for_every_output():
    """Listing 1: each of the (h-2) x (w-2) outputs reads 9 pixels and 9 weights and writes itself."""
    h, w = 34, 18
    program = liftpy.parse((EXAMPLES / "stencil2d.lift").read_text())
    exe = liftpy.compile(program, {"height": h, "width": w})
    (kernel,) = exe.generated.kernels
    outputs = (h - 2) * (w - 2)
    traffic = kernel_traffic(kernel.ir)
    assert (traffic.read, traffic.written) == (outputs * 18 * 4, outputs * 4)


def test_a_prepared_layer_counts_only_the_kernels_each_call_runs():
    """The weights' layout change (relaid vectors of 16 kernels) runs once per prepared layer: a call's figure
    leaves it out."""
    import numpy as np

    from liftpy import nn
    from liftpy.nn import conv

    layer = nn.make_layer(input_shape=(16, 12, 12), kernel_shape=(16, 3, 3), stride=1, padding=1)
    config = {"parallel": 3, "unroll": 1, "vector": 16, "vector_outer": 2, "reorder": 1, "block.kernelWeights": 16,
              "block.window": 12, "chunk": 0, "local_memory": 0, "local_size": 0, "pad_copy": 0, "partial": 0,
              "sequential_outer": 0}
    plan = conv.plan(layer, config)
    bound = plan.bind(np.ones((16, 16, 3, 3), np.float32), None)
    assert bound.program.hoisted == ("conv2d_weightsT",)
    (per_call,) = [p for p, _ in bound.program.kernels]
    relayout = next(k for k in plan.executable.generated.kernels if k.name == "conv2d_weightsT")
    assert kernel_traffic(relayout.ir) == Traffic(16 * 16 * 9 * 4, 16 * 16 * 9 * 4)  # each weight read and written once
    assert bound.program.moved_bytes == kernel_traffic(per_call.ir).total
    assert kernel_traffic(per_call.ir).written == 16 * 12 * 12 * 4
