"""Give the trials a tuning database measured before schema 3 their data-movement figure (``moved_bytes``).

    python scripts/fill_moved_bytes.py DB [--network vgg16]

For each layer of the network, each correct trial of its program (the automatic route) measured again (the
only ones :func:`liftpy.tuning.db.ranked` compares by that figure) is compiled again on this machine's OpenCL
device; its kernels must be the ones the trial ran (their sources' hashes as recorded, the program's file named
where it was tuned), else it is left without a figure and said so.
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from liftpy.nn.layers import NETWORKS  # noqa: E402
from liftpy.nn import conv  # noqa: E402
from liftpy.runtime import device_info, get_device  # noqa: E402
from liftpy.tuning.db import TuningDB  # noqa: E402
from liftpy.tuning.program import source_hashes  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("--network", default="vgg16", choices=sorted(NETWORKS))
    args = parser.parse_args()
    device = get_device()
    name = device_info(device).name
    db = TuningDB(args.db)
    filled = refused = 0
    for layer in NETWORKS[args.network].values():
        subject = conv.route_task(layer)
        for trial in db.trials(subject, name, "ok"):
            if not trial.measured_again or trial.moved_bytes is not None:
                continue
            plan = conv.plan(layer, trial.config, device=device)
            here = getattr(subject, "path", None)  # a program's kernels name its file, where it was tuned
            sources = {k: s.replace(f"from {here}:", f"from {trial.label}:") if here else s
                       for k, s in plan.sources.items()}
            if source_hashes(sources) != db.source_hashes(subject, trial.algorithm, trial.config, name):
                print(f"{layer.name} {trial.algorithm} {trial.config}: its kernels are not the ones measured; "
                      "left without a figure")
                refused += 1
                continue
            w = np.zeros((layer.kernels, layer.channels // layer.groups, layer.kernel_height,
                          layer.kernel_width), np.float32)
            moved = plan.bind(w, None).program.moved_bytes
            db.set_moved_bytes(subject, trial.algorithm, trial.config, name, moved)
            print(f"{layer.name:9} {trial.time_ms:8.3f} ms {moved / 2**20:8.1f} MiB moved")
            filled += 1
    db.close()
    print(f"{filled} trials given their figure, {refused} left without")
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
