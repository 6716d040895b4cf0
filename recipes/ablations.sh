#!/usr/bin/env bash
# The paper's Table 3 on Multi30k (results: docs/results.md#the-papers-table-3-on-multi30k): the Multi30k recipe's
# model (recipes/multi30k.sh) with one change per row (the rows: recipes/ablations.py), each trained for STEPS steps
# (default 600; WARMUP=120 of them warm-up, then the recipe's cosine decay) and scored on the recipe's tuning split
# (beam 4); validation is never looked at. JOBS rows train at once (default: one per core), each on
# THREADS=cores/JOBS threads. Each run lands in OUTPUT_DIR/ROW/sSEED (log: OUTPUT_DIR/ROW/sSEED.log) only once it is
# finished: a rerun (after a crash or SIGKILL too) trains only the runs missing. Then writes OUTPUT_DIR/table.md and
# OUTPUT_DIR/ablations.png and prints the table.
# Rows whose difference from the recipe's model lies within the spread of its three seeds train with a second seed.
# Usage: [STEPS=600] [WARMUP=120] [JOBS=2] recipes/ablations.sh [DATA_DIR] [OUTPUT_DIR] [extra run_translation.py flags...]
set -euo pipefail
DATA=${1:-../shared/data}; OUT=${2:-outputs/ablations}; shift $(( $# < 2 ? $# : 2 ))
PY=${PY:-python}
HERE=$(cd "$(dirname "$0")" && pwd)
[ -f "$DATA/multi30k/train.de" ] || { echo "error: $DATA/multi30k/train.de not found: give the data directory as the first argument (make ablations DATA=path)" >&2; exit 2; }
STEPS=${STEPS:-600}; WARMUP=${WARMUP:-120}
JOBS=${JOBS:-$(nproc)}
THREADS=${THREADS:-$(( $(nproc) / JOBS > 0 ? $(nproc) / JOBS : 1 ))}
mkdir -p "$OUT"
set -m  # each job its own process group, so that the trap stops a job's whole tree (its training included)
trap 'for p in $(jobs -p); do kill -- "-$p" 2>/dev/null || true; done' EXIT  # a failed run stops the others

EXTRA=("$@")
run() {  # NAME OVERRIDES FLAGS SEED: one row's run, in NAME/sSEED.partial until it has finished
  local name=$1 change=$2 flags=$3 seed=$4
  local dir="$OUT/$name/s$seed"
  [ "$change" = - ] && change=""
  [ "$flags" = - ] && flags=""
  mkdir -p "$OUT/$name"
  # shellcheck disable=SC2086
  if CHANGE=$change VALIDATE=false SEEDS=$seed THREADS=$THREADS PY=$PY "$HERE/multi30k.sh" "$DATA" "$dir.partial" \
      --max_steps "$STEPS" --warmup_steps "$WARMUP" --save_strategy no --overwrite_output_dir true $flags "${EXTRA[@]}" \
      > "$dir.log" 2>&1; then
    mv "$dir.partial" "$dir"
    grep -ho "'eval_bleu': [0-9.]*" "$dir.log" | tail -n 1 | sed "s|^|$name seed $seed: |"
  else
    tail -n 30 "$dir.log"; echo "error: $name seed $seed failed (log: $dir.log)" >&2; return 1
  fi
}

train_rows() {  # ROWS_COMMAND...: the runs of the rows it prints that have not finished, JOBS at a time
  local name change flags seeds seed pids=()
  while IFS=$'\t' read -r name change flags seeds; do
    for seed in $seeds; do
      [ -f "$OUT/$name/s$seed/all_results.json" ] && continue
      while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
      echo "$name seed $seed: training ($THREADS thread(s), log $OUT/$name/s$seed.log)"
      run "$name" "$change" "$flags" "$seed" &
      pids+=("$!")
    done
  done < <("$PY" "$HERE/ablations.py" "$@")
  for pid in "${pids[@]}"; do wait "$pid"; done  # each run's status, also of one already reaped by wait -n
}

train_rows rows  # every row with its first seed (the recipe's model with three)
train_rows second-seeds "$OUT"  # then a second seed for each row whose difference lies within the noise
"$PY" "$HERE/ablations.py" table "$OUT" --markdown "$OUT/table.md" --plot "$OUT/ablations.png"
cat "$OUT/table.md"
