#!/usr/bin/env bash
# liftpy's tests and a short tuning of a real layer on an NVIDIA GPU's OpenCL, on a machine without internet:
# the Python packages liftpy needs beyond the image's come as wheels in .whl/, downloaded beforehand where pip
# works (the machine's Python is 3.12):
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#         --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform any -d .whl \
#         pyopencl pytools platformdirs siphash24 lark z3-solver
# and the driver's OpenCL library is registered with the ICD loader when no vendor file names it. Everything
# lands in $OUT (default ./gpu-out). Not part of CI: no GPU there.
#
#     OUT=/tmp/gpu bash benchmarks/gpu_opencl.sh [test-seconds] [tune-trials]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=$(realpath -m "${OUT:-gpu-out}"); mkdir -p "$OUT"
TEST_SECONDS=${1:-240}; TRIALS=${2:-40}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
# liftpy.grammar and liftpy.catalogue are the top-level grammar/ and rewrites/ (setup.cfg's package_dir); without
# an install, links stand in for them
ln -sfn ../rewrites liftpy/catalogue; ln -sfn ../grammar liftpy/grammar
if ! grep -qs nvidia /etc/OpenCL/vendors/*.icd; then
    lib=$(ldconfig -p | awk '/libnvidia-opencl.so.1/ {print $NF; exit}')
    [ -n "$lib" ] || lib=$(find / -name 'libnvidia-opencl.so.1' 2>/dev/null | head -1)
    mkdir -p /etc/OpenCL/vendors && echo "${lib:-libnvidia-opencl.so.1}" > /etc/OpenCL/vendors/nvidia.icd
fi
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; lscpu | grep 'Model name'
  python3 -c 'import liftpy.runtime as r; print(r.device_info(r.get_device()))'; } 2>&1 | tee "$OUT/machine.txt"
# the default test set, on as many workers as the cores allow (NVIDIA's compiler runs on the CPU); each failure
# is written to $OUT/failures.txt as it arrives, so that a run cut at the limit still tells what failed
mkdir -p /tmp/plugins && cat > /tmp/plugins/faillog.py <<'PY'
import os
def pytest_runtest_logreport(report):
    if report.failed:
        with open(os.path.join(os.environ["OUT"], "failures.txt"), "a") as f:
            f.write(f"==== {report.nodeid} ({report.when})\n{report.longreprtext[-3000:]}\n")
PY
OUT=$OUT PYTHONPATH=$PYTHONPATH:/tmp/plugins timeout -s KILL "$TEST_SECONDS" python3 -m pytest -q -n 15 --timeout=100 \
    --tb=short -p no:cacheprovider -p no:benchmark -p faillog tests/ > "$OUT/tests.txt" 2>&1
echo "tests exit $? after $SECONDS s"; tail -25 "$OUT/tests.txt"
# a real layer through the automatic route and the hand-written pipelines, against PyTorch on the same GPU
timeout 280 python3 benchmarks/vgg16.py --layers vgg16.10 --trials "$TRIALS" --rounds 5 --repeat 20 --torch-device cuda \
    --db "$OUT/vgg16-gpu.sqlite" --out "$OUT/vgg16-gpu.txt" > "$OUT/vgg16-log.txt" 2>&1
echo "vgg16 exit $? after $SECONDS s"; tail -30 "$OUT/vgg16-log.txt"
python3 -m liftpy.cli report --db "$OUT/vgg16-gpu.sqlite" --layer vgg16.10 > "$OUT/report.txt" 2>&1; head -60 "$OUT/report.txt"
