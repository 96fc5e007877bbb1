"""Time to infer the parameter space and sample 1000 valid configurations, for each VGG-16 layer.

    python benchmarks/params_bench.py [--target mali-g72] [--samples 1000] [--repeat 3]

Uses examples/partial_conv.lift (the paper's listing 4) with each layer's sizes (padding 1). Target: under
10 s per layer on a 2-core machine.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import liftpy  # noqa: E402
from liftpy.nn.layers import VGG16  # noqa: E402
from liftpy.params import parameters  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", default="mali-g72")
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    program = liftpy.load(ROOT / "examples" / "partial_conv.lift")
    print(f"{'layer':10} {'input':>12} {'kernels':>8}  {'infer s':>8} {'sample s':>9} {'total s':>8}  valid configurations")
    totals = []
    for layer in VGG16.values():
        sizes = {"inputChannels": layer.channels, "kernelHeight": 3, "kernelWidth": 3, "numKernels": layer.kernels,
                 "paddedInputHeight": layer.height + 2, "paddedInputWidth": layer.width + 2, "kernelStride": (1, 1)}
        infer, draw = [], []
        for r in range(args.repeat):
            start = time.perf_counter()
            space = parameters(program, sizes, device=args.target)
            space.domains()
            middle = time.perf_counter()
            configs = space.sample(args.samples, seed=r)
            end = time.perf_counter()
            infer.append(middle - start)
            draw.append(end - middle)
            assert len(configs) == args.samples
        total = statistics.median(i + d for i, d in zip(infer, draw))
        totals.append(total)
        print(f"{layer.name:10} {layer.channels:>4}x{layer.height}x{layer.width:<4} {layer.kernels:>8}  "
              f"{statistics.median(infer):8.2f} {statistics.median(draw):9.2f} {total:8.2f}  {space.count()}")
    print(f"slowest layer {max(totals):.2f} s (target < 10 s); medians of {args.repeat} runs, {args.samples} samples each")


if __name__ == "__main__":
    main()
