#!/usr/bin/env bash
# The GPU check: the CUDA tests (make test-gpu) and the GPU benchmark (ours vs MarianMTModel: training tokens/s and MFU
# in bf16, eager and torch.compile, base and big shapes; greedy and beam in PyTorch and CTranslate2), about 8 minutes
# on one H100. Everything goes to one log, $OUT/gpu-check.log, and the benchmark's numbers to $OUT/benchmark-gpu.json.
#
#   scripts/gpu_check.sh                      # in a clone, with a CUDA build of torch and the package's dependencies
#   WHEELS=dir scripts/gpu_check.sh           # offline: first install the wheels in dir (pip --no-index)
#
# Variables: PY (default .venv/bin/python if present, else python3), OUT (default outputs/gpu-check), TEST_SECONDS
# (default 200: the tests are stopped after this), TESTS (pytest -k: only these tests), BENCHMARK_BUDGET (default 240:
# no benchmark case starts later), TASKS (default "train lengths greedy beam"), PRESETS (default "base big").
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-outputs/gpu-check}
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
mkdir -p "$OUT"
LOG="$OUT/gpu-check.log"
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1

if [ -n "${WHEELS:-}" ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/gpu-check-site "$WHEELS"/*.whl \
    || { echo "error: could not install the wheels in $WHEELS"; exit 1; }
  export PYTHONPATH="/tmp/gpu-check-site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false

echo "== $(date -u '+%Y-%m-%d %H:%M:%S') GPU check"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
"$PY" - <<'EOF'
import importlib
import torch
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), GPU {torch.cuda.get_device_name()}, "
      f"bf16 {torch.cuda.is_bf16_supported()}")
for name in ("transformers", "accelerate", "datasets", "tokenizers", "ctranslate2"):
    try:
        module = importlib.import_module(name)
        extra = f", CUDA devices {module.get_cuda_device_count()}" if name == "ctranslate2" else ""
        print(f"{name} {module.__version__}{extra}")
    except Exception as error:  # noqa: BLE001
        print(f"{name}: not importable ({type(error).__name__}: {error})")
EOF

echo "== $(date -u '+%H:%M:%S') CUDA tests"
timeout "${TEST_SECONDS:-200}" "$PY" -m pytest -q -m cuda -p no:cacheprovider tests/test_gpu.py ${TESTS:+-k "$TESTS"}
echo "tests exit status: $?"

echo "== $(date -u '+%H:%M:%S') GPU benchmark"
# shellcheck disable=SC2086 # the task list splits into words
"$PY" scripts/benchmark.py --device cuda --time_budget "${BENCHMARK_BUDGET:-240}" --output "$OUT/benchmark-gpu.json" \
  --tasks ${TASKS:-train lengths greedy beam} ${PRESETS:+--presets $PRESETS}
echo "benchmark exit status: $?"
echo "== $(date -u '+%H:%M:%S') done"
