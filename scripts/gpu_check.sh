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
# no benchmark case starts later), TASKS (default "train lengths greedy beam"), PRESETS (default "base big"),
# BENCHMARK_FLAGS (more flags for the benchmark, e.g. "--compile reduce-overhead --attention flex_attention"),
# CORPUS_PAIRS (default 0: none; N: train-translation on a generated corpus of N pairs of natural lengths, base preset,
# packed rows under CUDA graphs, CORPUS_STEPS steps (default 600); its logs' tokens_per_second are the speed to compare
# with the benchmark's "ours --packing" rows).
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
  --tasks ${TASKS:-train lengths greedy beam} ${PRESETS:+--presets $PRESETS} ${BENCHMARK_FLAGS:-}
echo "benchmark exit status: $?"

if [ "${CORPUS_PAIRS:-0}" -gt 0 ]; then
  echo "== $(date -u '+%H:%M:%S') train-translation: $CORPUS_PAIRS generated pairs of natural lengths, packed, CUDA graphs"
  # words of 3 to 6 letters from a list of 20000 (more than the 16000 BPE tokens: some take two), as many per
  # sentence as the benchmark's lengths draw (minus EOS)
  "$PY" - "$OUT/corpus.tsv" "$CORPUS_PAIRS" <<'EOF'
import sys

import numpy as np

from benchmarks.training import synthetic_lengths

rng = np.random.default_rng(0)
letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
words = np.array(["".join(rng.choice(letters, rng.integers(3, 7))) for _ in range(5000)])
with open(sys.argv[1], "w") as f:
    for s, t in zip(*synthetic_lengths(int(sys.argv[2]))):
        f.write(" ".join(rng.choice(words, s - 1)) + "\t" + " ".join(rng.choice(words, t - 1)) + "\n")
EOF
  "$PY" -m vanilla_transformer.run_translation --train_file "$OUT/corpus.tsv" --source_lang src --target_lang tgt \
    --output_dir "$OUT/corpus-run" --config_name base --vocab_size 16000 \
    --max_source_length 128 --max_target_length 128 --max_tokens 12800 --packing true --torch_compile true \
    --torch_compile_mode reduce-overhead --bf16 true --max_steps "${CORPUS_STEPS:-600}" --logging_steps 100 \
    --do_train --do_eval false --do_predict false --save_strategy no --disable_tqdm true --report_to none \
    --dataloader_num_workers 2 2>&1 | grep -E "tokens_per_second|train_runtime|padding|error|Error" | tail -12
  echo "train-translation exit status: ${PIPESTATUS[0]}"
fi
echo "== $(date -u '+%H:%M:%S') done"
