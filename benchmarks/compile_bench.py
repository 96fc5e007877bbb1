"""Compile time of the code generator: IR (parsed, typed) to OpenCL C source, without the OpenCL build.

    python benchmarks/compile_bench.py [--repeat 5]

Prints, for every program of the test corpus and for the largest example (the paper's partial convolution
at the size of VGG-16 layer 7), the median time of parse + type check + generate, and of generate alone.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import liftpy  # noqa: E402
from liftpy.codegen.program import generate  # noqa: E402
from tests.test_codegen import CASES  # noqa: E402

LARGEST = (
    ROOT / "examples" / "partial_conv.lift",
    # VGG-16 layer 7 (128x112x112 input padded by 1, 128 kernels 3x3) with a valid configuration: 8x8 tiles,
    # 4 kernels per work-group, 4 windows per work-item, chunks of 144 elements, float4
    {"inputChannels": 128, "kernelHeight": 3, "kernelWidth": 3, "numKernels": 128, "paddedInputHeight": 114,
     "paddedInputWidth": 114, "kernelStride": (1, 1), "θ": 8, "κ": 4, "σ": 4, "ω": 144, "v": 4},
)


def median_ms(fn, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows = []
    cases = [(c.values[0], c.values[1]) for c in CASES] + [LARGEST]
    for path, sizes in cases:
        text = Path(path).read_text()
        program = liftpy.parse(text, str(path))
        total = median_ms(lambda: generate(liftpy.parse(text, str(path)), sizes), args.repeat)
        gen = median_ms(lambda: generate(program, sizes), args.repeat)
        lines = sum(len(k.source.splitlines()) for k in generate(program, sizes).kernels)
        rows.append((Path(path).stem + (" (VGG-16 layer 7)" if (path, sizes) == LARGEST else ""), total, gen, lines))
    width = max(len(r[0]) for r in rows)
    print(f"{'program':{width}}  parse+type+generate ms  generate ms  lines of OpenCL")
    for name, total, gen, lines in rows:
        print(f"{name:{width}}  {total:22.2f}  {gen:11.2f}  {lines:14d}")
    corpus = rows[:-1]
    print(f"corpus of {len(corpus)} programs: median {statistics.median(r[1] for r in corpus):.2f} ms, "
          f"total {sum(r[1] for r in corpus):.1f} ms (parse+type+generate, medians of {args.repeat} runs)")


if __name__ == "__main__":
    main()
