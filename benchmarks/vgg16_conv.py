"""liftpy's generated convolutions on the nine VGG-16 layers against baselines measured in the same run.

    python benchmarks/vgg16_conv.py [--samples 8] [--layers vgg16.2,vgg16.7]

For each layer: the best of N configurations of the automatic route, its default then sampled ones (median
kernel time of 3 runs each, every configuration checked against the reference), next to the hand-written
naive direct OpenCL convolution (benchmarks/baselines.py) on the same device and numpy's im2col + GEMM; times,
GFLOP/s, memory, ratios.
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import liftpy.nn as nn  # noqa: E402
from liftpy.nn.conv import route_task  # noqa: E402
from liftpy.tuning.guess import best_guess  # noqa: E402
from benchmarks.baselines import im2col_gemm, naive_opencl  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--layers", default=",".join(nn.VGG16))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'layer':9} {'liftpy ms':>9} {'GFLOP/s':>8} {'naive ms':>9} {'x naive':>8} {'im2col ms':>9} {'x im2col':>8} "
          f"{'MiB':>6} {'im2col MiB':>10} {'x mem':>6}  best configuration")
    for name in args.layers.split(","):
        layer = nn.VGG16[name]
        x = rng.standard_normal((1, layer.channels, layer.height, layer.width)).astype(np.float32)
        w = (rng.standard_normal((layer.kernels, layer.channels, 3, 3)) / np.sqrt(9 * layer.channels)).astype(np.float32)
        b = rng.standard_normal(layer.kernels).astype(np.float32)
        space = nn.conv_space(layer)
        guess = best_guess(route_task(layer), space.device, space=space)
        configs = [guess] + space.sample(args.samples - 1, seed=args.seed)
        best = None
        for config in configs:
            p = nn.plan(layer, config)
            result = p.run(x, w, b, repeat=3, warmup=1, check=True)
            if best is None or result.kernel_ms < best[1].kernel_ms:
                best = (p, result)
        p, result = best
        _, naive_ms = naive_opencl(x, w, b, layer.stride, layer.padding, repeat=1)
        _, im2col_ms = im2col_gemm(x, w, b, layer.stride, layer.padding)
        mib, im2col_mib = p.memory_bytes / 2**20, p.im2col_bytes / 2**20
        rows.append((result.kernel_ms, naive_ms, im2col_ms, mib, im2col_mib))
        print(f"{name:9} {result.kernel_ms:9.2f} {result.gflops(layer):8.1f} {naive_ms:9.1f} {naive_ms / result.kernel_ms:8.1f} "
              f"{im2col_ms:9.2f} {im2col_ms / result.kernel_ms:8.2f} {mib:6.1f} {im2col_mib:10.1f} {im2col_mib / mib:6.2f}"
              f"  {p.config}")
    total = [sum(r[i] for r in rows) for i in range(5)]
    print(f"{'total':9} {total[0]:9.2f} {'':8} {total[1]:9.1f} {total[1] / total[0]:8.1f} {total[2]:9.2f} "
          f"{total[2] / total[0]:8.2f} {total[3]:6.1f} {total[4]:10.1f} {np.mean([r[4] / r[3] for r in rows]):6.2f} (mean)")
    print(f"({args.samples} configurations per layer through the automatic route; times are medians)")


if __name__ == "__main__":
    main()
