#!/usr/bin/env bash
# The paper's base model on WMT14 English -> German (sections 5 and 6.1): shared BPE of 37000 tokens, d_model 512, 6+6
# layers, 8 heads, d_ff 2048, post-LN, dropout 0.1, label smoothing 0.1, Adam (0.9, 0.98, 1e-9) with the
# inverse-square-root schedule over 4000 warm-up steps (peak 512^-0.5 x 4000^-0.5 = 7e-4, equation 3), about 25000
# source and 25000 target tokens per optimizer step, 100000 steps, the last 5 checkpoints averaged, beam 4 with length
# penalty 0.6. Then newstest2014 is translated and scored twice (`vanilla-transformer score`): sacreBLEU (cased, 13a)
# and the paper's own metric, tokenized BLEU with compound splitting. Cost and results: docs/training.md.
#
# Usage: [LAUNCH=...] [NPROC=N] recipes/wmt14_en_de.sh [DATA_DIR|hub] [OUTPUT_DIR] [extra run_translation.py flags...]
#   DATA_DIR holds wmt14_en_de/{train,newstest2013,newstest2014}.{en,de}, one sentence a line (default ../shared/data);
#   `hub` reads the Hub dataset wmt14 (de-en: validation = newstest2013, test = newstest2014) instead.
#   LAUNCH starts the training processes, NPROC says how many: LAUNCH="torchrun --nproc_per_node 8" NPROC=8, or
#   LAUNCH="accelerate launch --num_processes 8" NPROC=8 (default: one process, "$PY").
#   TOKENS_PER_STEP (default 25000) padded tokens per side and optimizer step are reached as --max_tokens per process x
#   NPROC x gradient accumulation; MAX_TOKENS (default 4096) is the most one process holds at once (lower it when the
#   GPU runs out of memory: the accumulation grows to keep the step's size). These shorten or change the run:
#     STEPS (default 100000): optimizer steps (--max_steps);
#     SAVE_STEPS (default 1500, about the paper's checkpoint interval of 10 minutes on 8 P100s): a checkpoint every
#       SAVE_STEPS steps (--save_steps), the last 5 kept and averaged; a run that saves none (STEPS < SAVE_STEPS)
#       translates with its final weights;
#     MAX_LENGTH (default 256): tokens per sentence, source and target (--max_source_length, --max_target_length, and
#       --generation_max_length of the test translations); longer ones are truncated.
#   BF16 (default: true where bf16 pays, training.fast_bf16) sets bf16 autocast. PACKING (default true where torch
#   sees a CUDA GPU, else false) trains on packed rows compiled with CUDA graphs (--packing true --torch_compile true
#   --torch_compile_mode reduce-overhead: faster than token budgets on a GPU, docs/gpu.md; on CPUs it does not pay).
#   Extra flags go to the training command and replace the recipe's (a later flag wins). Python runs with TCMalloc
#   where it is installed (recipes/tcmalloc.sh: TCMALLOC=path chooses the library, TCMALLOC= none).
# Writes OUTPUT_DIR (model, checkpoints, train_results.json), OUTPUT_DIR/averaged (the averaged model, when
# checkpoints were saved) and OUTPUT_DIR/newstest2014 (generated_predictions_test.txt, scores.json).
set -euo pipefail
DATA=${1:-../shared/data}; OUT=${2:-outputs/wmt14_en_de}; shift $(( $# < 2 ? $# : 2 ))
PY=${PY:-python}
LAUNCH=${LAUNCH:-$PY}
NPROC=${NPROC:-1}
TOKENS_PER_STEP=${TOKENS_PER_STEP:-25000}
MAX_TOKENS=${MAX_TOKENS:-4096}
STEPS=${STEPS:-100000}
SAVE_STEPS=${SAVE_STEPS:-1500}
MAX_LENGTH=${MAX_LENGTH:-256}
PACKED=()
PACKING=${PACKING:-$("$PY" -c 'import torch; print(str(torch.cuda.is_available()).lower())' 2>/dev/null || echo false)}
[ "$PACKING" = true ] && PACKED=(--packing true --torch_compile true --torch_compile_mode reduce-overhead)
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/tcmalloc.sh"
if [ "$DATA" = hub ]; then
  TRAIN=(--dataset_name wmt14 --dataset_config_name de-en)
  TEST=(--dataset_name wmt14 --dataset_config_name de-en)
else
  WMT="$DATA/wmt14_en_de"
  for f in train.en train.de newstest2013.en newstest2013.de newstest2014.en newstest2014.de; do
    [ -f "$WMT/$f" ] || { echo "error: $WMT/$f not found: give the data directory (or 'hub') as the first argument" >&2; exit 2; }
  done
  TRAIN=(--train_file "$WMT/train" --validation_file "$WMT/newstest2013")
  TEST=(--test_file "$WMT/newstest2014")
fi
# gradient accumulation so that max_tokens x processes x accumulation ~ TOKENS_PER_STEP, max_tokens <= MAX_TOKENS
ACCUM=$(( (TOKENS_PER_STEP + MAX_TOKENS * NPROC - 1) / (MAX_TOKENS * NPROC) ))
PER_PROCESS=$(( TOKENS_PER_STEP / (NPROC * ACCUM) ))
echo "batches: --max_tokens $PER_PROCESS x $NPROC process(es) x $ACCUM accumulation = $(( PER_PROCESS * NPROC * ACCUM )) tokens per side and step"
BF16=${BF16:-$("$PY" -c "from vanilla_transformer.training import fast_bf16; print(str(fast_bf16()).lower())")}
echo "bf16 autocast: $BF16"

# shellcheck disable=SC2086 # LAUNCH is a command line
$LAUNCH "$HERE/../scripts/run_translation.py" "${TRAIN[@]}" --source_lang en --target_lang de \
  --config_name base --vocab_size 37000 --max_source_length "$MAX_LENGTH" --max_target_length "$MAX_LENGTH" \
  --max_tokens "$PER_PROCESS" --gradient_accumulation_steps "$ACCUM" "${PACKED[@]}" \
  --learning_rate 7e-4 --lr_scheduler_type inverse_sqrt --warmup_steps 4000 \
  --adam_beta1 0.9 --adam_beta2 0.98 --adam_epsilon 1e-9 --weight_decay 0 --max_grad_norm 0 \
  --label_smoothing_factor 0.1 --bf16 "$BF16" --max_steps "$STEPS" \
  --save_strategy steps --save_steps "$SAVE_STEPS" --save_total_limit 5 --logging_steps 100 \
  --do_train --output_dir "$OUT" "$@"

saved=$(find "$OUT" -maxdepth 1 -type d -name 'checkpoint-*' | wc -l)  # (none: 0, under pipefail too)
MODEL="$OUT/averaged"
if [ "$saved" -gt 0 ]; then  # the last five, or as many as a shorter run saved
  "$PY" -m vanilla_transformer.cli average-checkpoints "$OUT" --last $(( saved < 5 ? saved : 5 )) \
    --output_dir "$MODEL" --force
else
  echo "no checkpoints saved (STEPS below SAVE_STEPS): the final weights translate newstest2014"
  MODEL="$OUT"
fi

"$PY" "$HERE/../scripts/run_translation.py" --model_name_or_path "$MODEL" "${TEST[@]}" \
  --source_lang en --target_lang de --do_predict --num_beams 4 --length_penalty 0.6 \
  --max_source_length "$MAX_LENGTH" --max_target_length "$MAX_LENGTH" --generation_max_length "$MAX_LENGTH" \
  --per_device_eval_batch_size 64 --bf16 "$BF16" --output_dir "$OUT/newstest2014"

if [ "$DATA" = hub ]; then
  REFERENCES="$OUT/newstest2014/references.de"
  "$PY" -c "import sys; from datasets import load_dataset
open(sys.argv[1], 'w', encoding='utf-8').write(''.join(p['de'] + '\n' for p in load_dataset('wmt14', 'de-en', split='test')['translation']))" "$REFERENCES"
else
  REFERENCES="$WMT/newstest2014.de"
fi
"$PY" -m vanilla_transformer.cli score "$OUT/newstest2014/generated_predictions_test.txt" "$REFERENCES" --lang de \
  --output "$OUT/newstest2014/scores.json"
