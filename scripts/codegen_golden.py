"""Everything the code generator produces, as text: to check that a change to it is behaviour-preserving.

    python scripts/codegen_golden.py > before.txt      # on the old commit (a worktree of it)
    python scripts/codegen_golden.py > after.txt       # on the new one
    diff before.txt after.txt

For every corpus program, the examples, and every convolution pipeline at its default configuration on three
layers, with a GPU's limits and a 2-core CPU's: each kernel's source, launch, arguments and the buffers.
Needs no OpenCL device.
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
from liftpy.nn import conv  # noqa: E402

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


def cases():
    for path in sorted((ROOT / "tests" / "corpus").glob("*.lift")):
        yield path.name, liftpy.load(path), corpus_sizes(path)
    for name, sizes in EXAMPLES:
        yield name, liftpy.load(ROOT / name), sizes
    for layer in (nn.VGG16["vgg16.10"], nn.make_layer((8, 12, 12), (8, 3, 3), 1, 1),
                  nn.make_layer((5, 11, 9), (12, 3, 3), 2, (1, 0, 2, 1), batch=2)):
        for algorithm in conv.ALGORITHMS:
            space = conv.conv_space(layer, algorithm=algorithm)
            config = conv.default_config(space, algorithm)
            yield (f"{algorithm} {layer.describe()} {config}", conv.algorithm_program(algorithm),
                   {**conv._sizes(layer, algorithm), **config})


def main():
    for name, program, sizes in cases():
        for device, limits in DEVICES.items():
            generated = generate(program, sizes, None, limits)
            print(f"==== {name} on {device}")
            for b in generated.buffers:
                print(f"buffer {b.name} {b.role} {b.shape} {b.dtype} {b.space}")
            for k in generated.kernels:
                print(f"kernel {k.name} writes {k.produces}, launch {k.launch.global_size} {k.launch.local_size}, "
                      f"args {k.args}")
                print(k.source)


if __name__ == "__main__":
    main()
