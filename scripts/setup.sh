#!/usr/bin/env bash
# Set liftpy up on this machine: Python 3.11+ with venv, an OpenCL platform (Debian's PoCL when none is
# installed), and a virtual environment in .venv with liftpy, its test extras, Ray (for the cluster tests)
# and LightGBM (the learned cost model). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
  echo "setup: need root to run: $*" >&2; exit 1; fi; }
apt_updated=0
apt_install() {
  if ! command -v apt-get >/dev/null; then echo "setup: please install $* (no apt-get here)" >&2; exit 1; fi
  if [ "$apt_updated" = 0 ]; then as_root apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

# Python 3.11 or newer, able to make virtual environments
PYTHON=${PYTHON:-python3}
if ! command -v "$PYTHON" >/dev/null || ! "$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
  apt_install python3 python3-venv python3-pip
  PYTHON=python3
fi
if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
  apt_install python3-venv
fi

# An OpenCL platform: PoCL on the CPU when the machine has none (see ../shared/reference/opencl-here.md)
if ! ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1; then
  echo "setup: no OpenCL platform found; installing Debian's pocl-opencl-icd" >&2
  apt_install pocl-opencl-icd
fi

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test,ray,model,onnx]'
echo "setup: ready (.venv/bin/liftpy, $(.venv/bin/python --version))" >&2
