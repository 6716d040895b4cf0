#!/usr/bin/env bash
# Multi30k German -> English from random initialization on a 2-core CPU (results: docs/results.md).
# Usage: recipes/multi30k.sh [DATA_DIR] [OUTPUT_DIR] [extra run_translation.py flags...]
# DATA_DIR holds multi30k/{train,validation}.{de,en} (default ../shared/data). Writes the model, tokenizer, model card,
# metrics (eval_results.json: sacreBLEU cased, detokenized, 13a, beam search) and the validation translations.
set -euo pipefail
DATA=${1:-../shared/data}; OUT=${2:-outputs/multi30k}; shift $(( $# < 2 ? $# : 2 ))
PY=${PY:-python}
[ -f "$DATA/multi30k/train.de" ] || { echo "error: $DATA/multi30k/train.de not found: give the data directory as the first argument (make recipe-multi30k DATA=path)" >&2; exit 2; }
source "$(dirname "$0")/tcmalloc.sh"
# bf16 autocast where a bf16 matrix product measures >= 1.2x faster than fp32 (training.fast_bf16); fp32 elsewhere
BF16=${BF16:-$("$PY" -c "from vanilla_transformer.training import fast_bf16; print(str(fast_bf16()).lower())")}
echo "bf16 autocast: $BF16"
# small preset (d_model 256, 3+3 layers, 4 heads, d_ff 1024), joint BPE 8000, pre-LN (a deviation from the paper's
# post-LN: it trains stably at a higher learning rate), dropout 0.2 + attention dropout 0.1, label smoothing 0.1,
# cosine decay over 16 epochs, batches of at most 1024 tokens a side (BATCHES: other batch flags, word-split).
BATCHES=${BATCHES:---max_tokens 1024}
# PACKING (default true where torch sees a CUDA GPU, else false): the same batches as packed rows, compiled with CUDA
# graphs (--packing true --torch_compile true --torch_compile_mode reduce-overhead: on a GPU the steps are short and
# many; docs/gpu.md); on CPUs it does not pay (docs/training.md)
PACKED=()
PACKING=${PACKING:-$("$PY" -c 'import torch; print(str(torch.cuda.is_available()).lower())' 2>/dev/null || echo false)}
[ "$PACKING" = true ] && PACKED=(--packing true --torch_compile true --torch_compile_mode reduce-overhead)
# shellcheck disable=SC2086
exec "$PY" scripts/run_translation.py \
  --train_file "$DATA/multi30k/train" --validation_file "$DATA/multi30k/validation" \
  --source_lang de --target_lang en --vocab_size 8000 \
  --config_name small --config_overrides normalize_before=true,dropout=0.2,attention_dropout=0.1 \
  $BATCHES "${PACKED[@]}" --learning_rate 1e-3 --warmup_steps 800 --lr_scheduler_type cosine \
  --weight_decay 0.0001 --max_grad_norm 1.0 --label_smoothing_factor 0.1 --bf16 "$BF16" \
  --num_train_epochs 16 \
  --save_strategy epoch --save_total_limit 5 --logging_steps 100 \
  --do_train --do_eval --num_beams 4 --per_device_eval_batch_size 64 \
  --output_dir "$OUT" "$@"
