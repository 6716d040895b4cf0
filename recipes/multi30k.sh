#!/usr/bin/env bash
# Multi30k German -> English from random initialization on a 2-core CPU (results: docs/results.md), tuned without
# looking at the validation split: 1015 training pairs are held out as a tuning split (`vanilla-transformer
# split-pairs`, seed 0), the model trains on the rest and is evaluated on the tuning split, where `tune-decoding` also
# chooses the length penalty of beam search (saved in the model's generation_config.json); validation is scored once,
# at the end, with that choice.
# SEEDS="42 7" trains one model per seed at the same time, each on its own core (THREADS=cores/models), in
# OUTPUT_DIR/member1.. (logs OUTPUT_DIR/memberN.log), and scores them as one ensemble (`run_translation.py
# --ensemble_with`: the members' log-probabilities averaged at each step of beam search) on the tuning split
# (OUTPUT_DIR/tune) and, once, on validation (OUTPUT_DIR/validation); the ensemble decodes with the first member's
# generation config (no tune-decoding).
# CHANGE="key=value,..." adds config fields to the recipe's --config_overrides (later keys win); VALIDATE=false (one
# seed) stops after the tuning split's score (no tune-decoding, no validation): recipes/ablations.sh trains its rows so.
# Usage: [SEEDS="42"] [LENGTH_PENALTIES="0.4 ..."] recipes/multi30k.sh [DATA_DIR] [OUTPUT_DIR] [extra run_translation.py flags...]
# DATA_DIR holds multi30k/{train,validation}.{de,en} (default ../shared/data). Writes OUTPUT_DIR/split/{train,tune}.*,
# the model, tokenizer and model card in OUTPUT_DIR with its tuning-split metrics (eval_results.json: sacreBLEU cased,
# detokenized, 13a, beam search) and translations, the decoding choice (tune_decoding.json), and the validation
# metrics and translations in OUTPUT_DIR/validation.
set -euo pipefail
DATA=${1:-../shared/data}; OUT=${2:-outputs/multi30k}; shift $(( $# < 2 ? $# : 2 ))
PY=${PY:-python}
[ -f "$DATA/multi30k/train.de" ] || { echo "error: $DATA/multi30k/train.de not found: give the data directory as the first argument (make recipe-multi30k DATA=path)" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)  # scripts/ beside recipes/: the recipe runs from any directory
source "$HERE/tcmalloc.sh"
SPLIT="$OUT/split"
"$PY" -m vanilla_transformer.cli split-pairs "$DATA/multi30k/train" "$SPLIT" --source_lang de --target_lang en \
  --fraction 0.035 --seed 0
# bf16 autocast where a bf16 matrix product measures >= 1.2x faster than fp32 (training.fast_bf16); fp32 elsewhere
BF16=${BF16:-$("$PY" -c "from vanilla_transformer.training import fast_bf16; print(str(fast_bf16()).lower())")}
echo "bf16 autocast: $BF16"
# small preset (d_model 256, 3+3 layers, 4 heads, d_ff 1024), joint BPE 8000, pre-LN (a deviation from the paper's
# post-LN: it trains stably at a higher learning rate), dropout 0.2 + attention dropout 0.1, label smoothing 0.1,
# peak learning rate 2e-3 with cosine decay over 16 epochs, batches of at most 1024 tokens a side (BATCHES: other
# batch flags, word-split).
BATCHES=${BATCHES:---max_tokens 1024}
# PACKING (default true where torch sees a CUDA GPU, else false): the same batches as packed rows, compiled with CUDA
# graphs (--packing true --torch_compile true --torch_compile_mode reduce-overhead: on a GPU the steps are short and
# many; docs/gpu.md); on CPUs it does not pay (docs/training.md)
PACKED=()
PACKING=${PACKING:-$("$PY" -c 'import torch; print(str(torch.cuda.is_available()).lower())' 2>/dev/null || echo false)}
[ "$PACKING" = true ] && PACKED=(--packing true --torch_compile true --torch_compile_mode reduce-overhead)
read -r -a SEEDS <<< "${SEEDS:-42}"
MEMBERS=${#SEEDS[@]}
# threads of each model: torch's own choice for one model, cores / models for several (THREADS sets it)
[ "$MEMBERS" -gt 1 ] && THREADS=${THREADS:-$(( $(nproc) / MEMBERS > 0 ? $(nproc) / MEMBERS : 1 ))}
train() {  # DIR SEED [flags...]: one model trained on the training part, evaluated on the tuning split
  local dir=$1 seed=$2; shift 2
  # shellcheck disable=SC2086
  ${THREADS:+env OMP_NUM_THREADS=$THREADS} "$PY" "$HERE/../scripts/run_translation.py" \
    --train_file "$SPLIT/train" --validation_file "$SPLIT/tune" \
    --source_lang de --target_lang en --vocab_size 8000 \
    --config_name small --config_overrides "normalize_before=true,dropout=0.2,attention_dropout=0.1${CHANGE:+,$CHANGE}" \
    $BATCHES "${PACKED[@]}" --learning_rate 2e-3 --warmup_steps 800 --lr_scheduler_type cosine \
    --weight_decay 0.0001 --max_grad_norm 1.0 --label_smoothing_factor 0.1 --bf16 "$BF16" \
    --num_train_epochs 16 \
    --save_strategy epoch --save_total_limit 5 --logging_steps 100 \
    --do_train --do_eval --num_beams 4 --per_device_eval_batch_size 64 --seed "$seed" \
    --output_dir "$dir" "$@"
}
validate() {  # MODEL_FLAGS...: validation, once, at the end, decoded as the (first) model's generation config says
  "$PY" "$HERE/../scripts/run_translation.py" "$@" --validation_file "$DATA/multi30k/validation" \
    --source_lang de --target_lang en --do_eval --predict_with_generate true --per_device_eval_batch_size 64 \
    --bf16 false --output_dir "$OUT/validation"
}

if [ "$MEMBERS" -gt 1 ]; then  # an ensemble: the members side by side, then scored as one
  mkdir -p "$OUT"
  set -m  # each job its own process group, so that the trap stops a job's whole tree (its training included)
  trap 'for p in $(jobs -p); do kill -- "-$p" 2>/dev/null || true; done' EXIT  # a failed member stops the others
  pids=()
  for i in $(seq 1 "$MEMBERS"); do
    train "$OUT/member$i" "${SEEDS[$(( i - 1 ))]}" "$@" > "$OUT/member$i.log" 2>&1 &
    pids+=("$!")
    echo "member $i: training on $THREADS thread(s), log $OUT/member$i.log"
  done
  members=()
  for i in $(seq 1 "$MEMBERS"); do
    wait "${pids[$(( i - 1 ))]}" || { tail -n 40 "$OUT/member$i.log"; echo "member $i failed" >&2; exit 1; }
    grep -ho "'train_wall_seconds': [0-9.]*" "$OUT/member$i.log" | sed "s/^/member $i: /"
    members+=("$OUT/member$i")
  done
  ensemble=(--model_name_or_path "${members[0]}" --ensemble_with "${members[@]:1}")
  "$PY" "$HERE/../scripts/run_translation.py" "${ensemble[@]}" --validation_file "$SPLIT/tune" \
    --source_lang de --target_lang en --do_eval --predict_with_generate true --per_device_eval_batch_size 64 \
    --bf16 false --output_dir "$OUT/tune"
  validate "${ensemble[@]}"
  exit 0
fi
train "$OUT" "${SEEDS[0]}" "$@"
[ "${VALIDATE:-true}" = false ] && exit 0

# The length penalty of beam search, chosen on the tuning split and saved with the model
read -r -a PENALTIES <<< "${LENGTH_PENALTIES:-0.4 0.6 0.8 1.0}"  # (above 1 the engines part: tune_decoding.py)
"$PY" -m vanilla_transformer.cli tune-decoding "$OUT" --source "$SPLIT/tune.de" --reference "$SPLIT/tune.en" \
  --num_beams 4 --length_penalty "${PENALTIES[@]}" --engine pytorch --save --output "$OUT/tune_decoding.json"
validate --model_name_or_path "$OUT"
