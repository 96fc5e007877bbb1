"""Export the networks of benchmarks/networks.py to ONNX: torchvision's ResNet-18, VGG-16, MobileNetV2 and
SqueezeNet 1.1 with random weights (``weights=None``: nothing is downloaded), batch 1, 224x224, in eval mode.

Needs torch, torchvision and onnx (not liftpy's dependencies: run it with any Python that has them):
    python benchmarks/export_models.py --out benchmarks/models
"""

import argparse
from pathlib import Path

MODELS = ("resnet18", "vgg16", "mobilenet_v2", "squeezenet1_1")


def _torchvision():
    """torchvision; where its compiled operators do not load against the installed torch (a CPU torch with a
    CUDA torchvision wheel), its Python models are still imported: they do not use those operators."""
    import torch

    try:
        import torchvision
    except RuntimeError:
        import sys

        for name in [m for m in sys.modules if m.startswith("torchvision")]:
            del sys.modules[name]
        torch.library.register_fake = lambda *args, **kwargs: (lambda function: function)
        import torchvision
    return torch, torchvision


def main() -> None:
    torch, torchvision = _torchvision()

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks/models", help="folder for the .onnx files")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.models.split(","):
        torch.manual_seed(args.seed)
        model = getattr(torchvision.models, name)(weights=None).eval()
        path = out / f"{name}.onnx"
        torch.onnx.export(model, (torch.randn(1, 3, 224, 224),), str(path), input_names=["input"],
                          output_names=["logits"], dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                          opset_version=17, dynamo=False)
        print(f"{path}: {path.stat().st_size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
