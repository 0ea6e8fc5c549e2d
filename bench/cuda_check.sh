#!/usr/bin/env bash
# The CUDA driver launch on a machine with a GPU: prints the GPU, the compiler and the driver rulec finds, then
# runs tests/test_cuda_driver.py (the fake-driver tests and the real-GPU ones) and fails if the real-GPU tests
# were skipped. About 10 s; capped at 60 s. Usage: bench/cuda_check.sh [python]  (default: python3)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${1:-python3}

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,driver_version,compute_cap --format=csv,noheader
"$PY" - <<'PYEOF'
import ctypes.util, shutil
from rulec.backends.cuda import nvrtc, runner
print("libcuda:", ctypes.util.find_library("cuda"), "| driver_present:", runner.driver_present())
print("compiler:", nvrtc.version() if nvrtc.load() else shutil.which("nvcc"), "| ptxas:", shutil.which("ptxas"))
PYEOF

out=$(timeout 60 "$PY" -m pytest tests/test_cuda_driver.py -q -rs -p no:cacheprovider 2>&1)
rc=$?
echo "$out" | tail -25
if [ $rc -ne 0 ]; then echo "cuda_check: FAILED (pytest exit $rc)"; exit $rc; fi
if grep -q "SKIPPED.*no CUDA driver" <<<"$out"; then echo "cuda_check: the real-GPU tests were skipped"; exit 1; fi
echo "cuda_check: OK, real-GPU tests ran"
