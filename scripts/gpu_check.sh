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
# with the benchmark's "ours --packing" rows), PHASES (default "tests benchmark").
#
# PHASES="recipes" runs the recipes with their own commands instead (what they pick on a GPU: packed rows under CUDA
# graphs, bf16), each under a time limit, and prints each one's wall time, score and speed: recipes/multi30k.sh
# (MULTI30K_SECONDS, default 240), recipes/conll.sh with one member (CONLL_SECONDS, default 150), and the WMT14 recipe
# on a generated corpus in its layout for WMT_STEPS steps (default 300; WMT_SECONDS, default 150; WMT_PAIRS generated
# pairs, default 100000), whose steps/s give the time of the paper's 100,000. DATA (default ../shared/data) holds
# multi30k/ and conll2003/: on a lent machine, a copy in an ignored folder carried with the tree (DATA=outputs/data).
# DRY_RUN=1 runs the recipes phase on a CPU in a few minutes (a few steps each, small evaluations): the script's own
# test.
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

PHASES=${PHASES:-tests benchmark}
phase() { [[ " $PHASES " == *" $1 "* ]]; }
echo "== $(date -u '+%Y-%m-%d %H:%M:%S') GPU check: $PHASES${DRY_RUN:+ (dry run on the CPU)}"
[ -n "${DRY_RUN:-}" ] || nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
"$PY" - <<'EOF'
import importlib
import torch
if torch.cuda.is_available():
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), GPU {torch.cuda.get_device_name()}, "
          f"bf16 {torch.cuda.is_bf16_supported()}")
else:
    print(f"torch {torch.__version__}: no CUDA GPU")
for name in ("transformers", "accelerate", "datasets", "tokenizers", "ctranslate2"):
    try:
        module = importlib.import_module(name)
        extra = f", CUDA devices {module.get_cuda_device_count()}" if name == "ctranslate2" else ""
        print(f"{name} {module.__version__}{extra}")
    except Exception as error:  # noqa: BLE001
        print(f"{name}: not importable ({type(error).__name__}: {error})")
EOF

if phase tests; then
  echo "== $(date -u '+%H:%M:%S') CUDA tests"
  timeout "${TEST_SECONDS:-200}" "$PY" -m pytest -q -m cuda -p no:cacheprovider tests/test_gpu.py ${TESTS:+-k "$TESTS"}
  echo "tests exit status: $?"
fi

if phase benchmark; then
  echo "== $(date -u '+%H:%M:%S') GPU benchmark"
  # shellcheck disable=SC2086 # the task list splits into words
  "$PY" scripts/benchmark.py --device cuda --time_budget "${BENCHMARK_BUDGET:-240}" --output "$OUT/benchmark-gpu.json" \
    --tasks ${TASKS:-train lengths greedy beam} ${PRESETS:+--presets $PRESETS} ${BENCHMARK_FLAGS:-}
  echo "benchmark exit status: $?"
fi

# recipe NAME SECONDS COMMAND...: the command under a time limit, its log in $OUT/NAME.log; prints its wall time, exit
# status, speed and scores
recipe() {
  local name=$1 seconds=$2 start status
  shift 2
  echo "== $(date -u '+%H:%M:%S') $name"
  start=$(date +%s)
  timeout "$seconds" "$@" >"$OUT/$name.log" 2>&1
  status=$?
  echo "$name: exit status $status after $(( $(date +%s) - start )) s (limit $seconds s; log $OUT/$name.log)"
  tr '\r' '\n' <"$OUT/$name.log" | grep -iE "^\{'train_runtime|^ +eval_(bleu|f1) |\"sacrebleu\"|error" | tail -4
}

if phase recipes; then
  DATA=${DATA:-../shared/data}
  SHORT=()  # the dry run: a few steps and a few validation sentences, on the CPU
  [ -n "${DRY_RUN:-}" ] && SHORT=(--max_steps 6 --max_eval_samples 16 --eval_strategy no --save_strategy no)
  recipe multi30k "${MULTI30K_SECONDS:-240}" env PY="$PY" recipes/multi30k.sh "$DATA" "$OUT/multi30k" \
    --disable_tqdm true "${SHORT[@]}"
  recipe conll "${CONLL_SECONDS:-150}" env PY="$PY" SEEDS=42 recipes/conll.sh "$DATA" "$OUT/conll" \
    --disable_tqdm true "${SHORT[@]}"
  WMT_STEPS=${WMT_STEPS:-$( [ -n "${DRY_RUN:-}" ] && echo 10 || echo 300 )}
  "$PY" - "$OUT/wmt-data/wmt14_en_de" "${WMT_PAIRS:-$( [ -n "${DRY_RUN:-}" ] && echo 2000 || echo 100000 )}" <<'EOF'
import os
import sys

import numpy as np

from benchmarks.training import synthetic_lengths

out, pairs = sys.argv[1], int(sys.argv[2])
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)
letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
words = np.array(["".join(rng.choice(letters, rng.integers(3, 7))) for _ in range(5000)])
for split, n in (("train", pairs), ("newstest2013", 200), ("newstest2014", 200)):
    sources, targets = synthetic_lengths(n)
    for lang, lengths in (("en", sources), ("de", targets)):
        with open(os.path.join(out, f"{split}.{lang}"), "w") as f:
            f.write("".join(" ".join(rng.choice(words, max(1, length - 1))) + "\n" for length in lengths))
EOF
  SMALL=()  # the dry run: the tiny preset and vocabulary
  [ -n "${DRY_RUN:-}" ] && SMALL=(--config_name tiny --vocab_size 500 --max_tokens 512)
  recipe wmt14 "${WMT_SECONDS:-150}" env PY="$PY" STEPS="$WMT_STEPS" SAVE_STEPS=$(( WMT_STEPS / 5 > 0 ? WMT_STEPS / 5 : 1 )) \
    recipes/wmt14_en_de.sh "$OUT/wmt-data" "$OUT/wmt14" --disable_tqdm true "${SMALL[@]}"
  echo "(the paper's 100,000 steps at that rate: 100000 / train_steps_per_second seconds)"
fi

if phase tests && [ "${CORPUS_PAIRS:-0}" -gt 0 ]; then
  echo "== $(date -u '+%H:%M:%S') train-translation: $CORPUS_PAIRS generated pairs of natural lengths, packed, CUDA graphs"
  # words of 3 to 6 letters from a list of 5,000, as many per sentence as the benchmark's lengths draw (minus EOS)
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
