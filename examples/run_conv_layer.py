"""Evaluate the paper's convolution layer (examples/conv_layer.lift) with liftpy's interpreter and check it
against a direct numpy convolution.

    python examples/run_conv_layer.py
"""

from pathlib import Path

import numpy as np

import liftpy

HERE = Path(__file__).parent


def numpy_conv(x_hwc, w_khwc, bias, stride, padding):
    """Direct convolution in numpy (float64): x is H x W x C, w is K x kh x kw x C, out is K x oh x ow."""
    top, bottom, left, right = padding
    x = np.pad(x_hwc.astype(np.float64), ((top, bottom), (left, right), (0, 0)))
    kh, kw = w_khwc.shape[1:3]
    windows = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(0, 1))  # oh' x ow' x C x kh x kw
    windows = windows[:: stride[0], :: stride[1]]
    return np.einsum("ijcab,kabc->kij", windows, w_khwc.astype(np.float64)) + bias[:, None, None]


def main():
    program = liftpy.load(HERE / "conv_layer.lift")
    print(f"convLayer : {program.type}")
    rng = np.random.default_rng(0)
    height, width, channels, kernels = 12, 9, 3, 8
    x = rng.standard_normal((height, width, channels)).astype(np.float32)
    w = rng.standard_normal((kernels, 3, 3, channels)).astype(np.float32)
    b = rng.standard_normal(kernels).astype(np.float32)
    for stride, padding in [((1, 1), (1, 1, 1, 1)), ((2, 2), (0, 1, 1, 0))]:
        out = liftpy.evaluate(
            program,
            {"kernelsWeights": w, "kernelsBiases": b, "inputData": x},
            sizes={"padSize": padding, "kernelStride": stride},
        )
        ref = numpy_conv(x, w, b, stride, padding)
        error = np.abs(out - ref).max() / np.abs(ref).max()
        status = "ok" if error < 1e-5 else "WRONG"
        print(f"input {height}x{width}x{channels}, {kernels} kernels 3x3, stride {stride}, padding {padding}: "
              f"output {out.shape}, max relative error {error:.1e} [{status}]")
        if status != "ok":
            raise SystemExit(1)


if __name__ == "__main__":
    main()
