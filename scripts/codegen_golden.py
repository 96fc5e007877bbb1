"""Everything the code generator produces, as text: to check that a change to it is behaviour-preserving.

    python scripts/codegen_golden.py > before.txt      # on the old commit (a worktree of it)
    python scripts/codegen_golden.py > after.txt       # on the new one
    diff before.txt after.txt

For every corpus program, the examples (the hand-written low-level convolutions at fixed configurations, and
the strategies deriving from them), and the automatic route's starting points for the convolution
(liftpy/nn/conv2d.lift) on three layers, with a GPU's limits and a 2-core CPU's: each kernel's source, launch,
arguments and the buffers. Needs no OpenCL device.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import liftpy  # noqa: E402
import liftpy.nn as nn  # noqa: E402
from liftpy.codegen.program import generate  # noqa: E402
from liftpy.device import Device  # noqa: E402
from liftpy.rewrite.route import RouteSpace  # noqa: E402

DEVICES = {"gpu": Device(), "cpu": Device(kind="cpu", compute_units=2, max_work_group_size=4096,
                                          max_work_item_sizes=(4096, 4096, 4096), local_mem_size=256 * 1024)}
EXAMPLES = [
    ("examples/stencil2d.lift", {"width": 30, "height": 20}),
    ("examples/partial_conv.lift", {"inputChannels": 4, "kernelHeight": 3, "kernelWidth": 3, "numKernels": 4,
                                    "paddedInputHeight": 6, "paddedInputWidth": 6, "kernelStride": (1, 1),
                                    "θ": 4, "κ": 2, "σ": 2, "ω": 12, "v": 4}),
]


def corpus_sizes(path: Path) -> dict:
    sizes = {}
    for item in re.search(r"^// sizes:(.*)$", path.read_text(), re.M).group(1).split():
        name, value = item.split("=")
        values = tuple(int(v) for v in value.split(","))
        sizes[name] = values[0] if len(values) == 1 else values
    return sizes


#: the hand-written low-level convolutions of examples/ (and the strategies that derive from them or from
#: listing 3) at fixed configurations on two small layers: sizes as the programs name them
_SMALL = dict(N=1, C=8, H=12, W=12, K=8, stride=(1, 1), padding=(1, 1, 1, 1))
_ODD = dict(N=2, C=5, H=11, W=9, K=12, stride=(2, 2), padding=(1, 0, 2, 1))
LOW_LEVEL = [
    ("conv_direct.lift", None, dict(_SMALL, kernel=(3, 3), σ=12, κ=8, v=8)),
    ("conv_direct.lift", None, dict(_ODD, kernel=(3, 3), σ=5, κ=12, v=4)),
    ("conv_direct_chw.lift", None, dict(_SMALL, kernel=(3, 3), σ=12, κ=8, v=8)),
    ("conv_rows.lift", None, dict(_SMALL, kernel=(3, 3), σ=12, κ=8, v=4)),
    ("conv_rows.lift", None, dict(_ODD, kernel=(3, 3), σ=5, κ=4, v=1)),
    ("conv_pipeline.lift", None, dict(_SMALL, kh=3, kw=3, θh=14, θw=22, ρh=0, ρw=8, κ=4, σ=3, ω=8, v=4)),
    ("conv_direct.lift", "inline_copies", dict(_ODD, kernel=(3, 3), σ=5, κ=12, v=4)),
    ("conv_direct_chw.lift", "inline_copies", dict(_SMALL, kernel=(3, 3), σ=12, κ=8, v=8)),
    ("conv_layer.lift", "convolution", dict(inputChannels=8, inputHeight=12, inputWidth=12, numKernels=8,
                                            kernelHeight=3, kernelWidth=3, padSize=(1, 1, 1, 1),
                                            kernelStride=(1, 1), ρh=2, ρw=6, v=4, ω=4, θ=9, θw=11, σ=3, κ=4)),
    ("conv_layer.lift", "direct", dict(inputChannels=5, inputHeight=11, inputWidth=9, numKernels=12, kernelHeight=3,
                                       kernelWidth=3, padSize=(1, 0, 2, 1), kernelStride=(2, 2), σ=5, κ=12, v=4)),
]


def _strategy(name: str):
    """A derivation of examples/derivations/ (loaded on demand: the catalogue does not hold their rules)."""
    if name == "inline_copies":
        from examples.derivations.copies import inline_copies

        return inline_copies("padded")
    if name == "convolution":
        from examples.derivations.convolution import convolution

        return convolution(square=False)
    from examples.derivations.direct import direct

    return direct()


def cases():
    for path in sorted((ROOT / "tests" / "corpus").glob("*.lift")):
        yield path.name, liftpy.load(path), corpus_sizes(path), None, tuple(DEVICES)
    for name, sizes in EXAMPLES:
        yield name, liftpy.load(ROOT / name), sizes, None, tuple(DEVICES)
    for file, strategy, sizes in LOW_LEVEL:
        program = liftpy.load(ROOT / "examples" / file)
        if strategy is not None:
            program = _strategy(strategy)(program).program
        yield f"examples/{file}{' by ' + strategy if strategy else ''} {sizes}", program, sizes, None, tuple(DEVICES)
    for layer in (nn.VGG16["vgg16.10"], nn.make_layer((8, 12, 12), (8, 3, 3), 1, 1),
                  nn.make_layer((5, 11, 9), (12, 3, 3), 2, (1, 0, 2, 1), batch=2)):
        task = nn.route_task(layer)
        for device, limits in DEVICES.items():  # the route's starting points for each device (its limits)
            space = RouteSpace(task.load(), task.size_map, limits, task.function)
            for config in space.starting_points():
                yield f"route {layer.describe()} {config}", space.lower(config), task.size_map, task.function, (device,)


def main():
    for name, program, sizes, function, devices in cases():
        for device in devices:
            generated = generate(program, sizes, function, DEVICES[device])
            print(f"==== {name} on {device}")
            for b in generated.buffers:
                print(f"buffer {b.name} {b.role} {b.shape} {b.dtype} {b.space}")
            for k in generated.kernels:
                print(f"kernel {k.name} writes {k.produces}, launch {k.launch.global_size} {k.launch.local_size}, "
                      f"args {k.args}")
                print(k.source)


if __name__ == "__main__":
    main()
