#!/usr/bin/env bash
# CoNLL-2003 English NER from random initialization on a 2-core CPU (measured: validation F1 0.867 after 57.7 min of
# training on one thread, the other core busy; the 0.88 target is not reached yet).
# Usage: recipes/conll.sh [DATA_DIR] [OUTPUT_DIR] [extra run_ner.py flags...]
# DATA_DIR holds conll2003/{train,validation}.txt (default ../shared/data). Writes the model, tokenizer, model card,
# metrics (eval_results.json: seqeval entity-level F1, IOB2) and the validation predictions.
set -euo pipefail
DATA=${1:-../shared/data}; OUT=${2:-outputs/conll}; shift $(( $# < 2 ? $# : 2 ))
PY=${PY:-python}
exec "$PY" scripts/run_ner.py \
  --train_file "$DATA/conll2003/train.txt" --validation_file "$DATA/conll2003/validation.txt" --vocab_size 8000 \
  --config_name small --config_overrides "encoder_layers=4,normalize_before=true,dropout=0.3,attention_dropout=0.1,use_crf=true,char_cnn_dim=128,relative_attention_max_distance=16,token_dropout=0.25" \
  --mention_replacement 0.3 \
  --per_device_train_batch_size 32 --learning_rate 7e-4 --warmup_steps 1000 --lr_scheduler_type cosine \
  --label_all_tokens true --weight_decay 0.01 --max_grad_norm 1.0 --num_train_epochs 30 --train_sampling_strategy group_by_length --bf16 true \
  --save_strategy epoch --save_total_limit 2 --logging_steps 200 --eval_strategy epoch \
  --do_train --do_eval --output_dir "$OUT" "$@"
