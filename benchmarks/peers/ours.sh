#!/usr/bin/env bash
# vanilla-transformer's Multi30k recipe (recipes/multi30k.sh: d_model 256, 3+3 pre-LN layers, 4 heads, d_ff 1024,
# batches of at most 1024 tokens a side, 16 epochs, bf16 where the CPU is fast at it, or as BF16=true/false says)
# timed as the peers are: trained for at most MINUTES minutes with a weights-only checkpoint every EVERY steps and no
# evaluation during training, on all 29,000 training pairs as the peers train (not the recipe's tuning-split
# remainder: 465 batches an epoch, 7,440 steps in 16 epochs); then every checkpoint translates the validation set
# (beam 4) and score.py scores it against the minutes since the start. The system's name in the report ends with the dtype trained in.
# Usage: benchmarks/peers/ours.sh [DATA_DIR] [OUT]    (DATA_DIR holds multi30k/{train,validation}.{de,en})
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)  # the repository: the script runs from any directory
shopt -s nullglob
DATA=${1:-../shared/data}; OUT=${2:-outputs/peers/ours}
MINUTES=${MINUTES:-60}; EVERY=${EVERY:-1000}; PY=${PY:-python}
BIN=$(dirname "$(command -v "$PY")")  # the console command beside the interpreter (PY=python: found on the PATH)
mkdir -p "$OUT"
date +%s > "$OUT/start_time"
PY=$PY timeout "$((MINUTES * 60))" "$ROOT/recipes/multi30k.sh" "$DATA" "$OUT" --do_eval false --learning_rate 1e-3 \
  --train_file "$DATA/multi30k/train" \
  --save_strategy steps --save_steps "$EVERY" --save_total_limit 1000 --save_only_model true > "$OUT/train.log" 2>&1 \
  || [ $? -eq 124 ]  # stopped by the clock, as intended
# CTranslate2 in float32 (converted on the fly), several times faster than PyTorch; docs/benchmarks.md compares the two
for checkpoint in "$OUT"/checkpoint-*/; do
  checkpoint=${checkpoint%/}
  "$BIN/vanilla-transformer" translate "$checkpoint" --engine ctranslate2 --compute_type float32 --num_beams 4 \
    --batch_size 64 --quiet --input "$DATA/multi30k/validation.de" --output "$checkpoint.hyp"
done
DTYPE=fp32; grep -q "^bf16 autocast: true" "$OUT/train.log" && DTYPE=bf16  # the recipe's choice (BF16=true/false sets it)
"$PY" "$ROOT/benchmarks/peers/score.py" "$OUT" "$DATA/multi30k/validation.en" --text \
  --system "vanilla-transformer $("$PY" -c 'import vanilla_transformer; print(vanilla_transformer.__version__)'), $DTYPE"
