#!/usr/bin/env bash
# CoNLL-2003 English NER from random initialization on a 2-core CPU, tuned without looking at the validation split:
# 10% of the training documents are held out as a tuning split (`vanilla-transformer split-documents`, seed 0), the
# taggers train on the rest and every choice is scored on the tuning split; validation is scored once, at the end.
# One tagger per seed in SEEDS (default two) trains at the same time, each on its own core, with stochastic weight
# averaging (below); they are evaluated as one ensemble (`run_ner.py --ensemble_with`: the members' emission and
# transition scores averaged), whose predictions are then made consistent within each document
# (--document_consistency: a repeated name takes its majority type, a lone surname its person's). Each member also
# learns the file's POS and chunk columns (--auxiliary_columns, training only). Results: docs/results.md.
# Usage: [SEEDS="42 7"] [THREADS=cores/members] recipes/conll.sh [DATA_DIR] [OUTPUT_DIR] [extra run_ner.py flags...]
# DATA_DIR holds conll2003/{train,validation}.txt (default ../shared/data). Extra flags go to every member's training
# (a repeated flag replaces the recipe's). Writes OUTPUT_DIR/split/{train,tune}.txt, OUTPUT_DIR/member1.. (model,
# tokenizer, model card, tuning-split metrics of the final weights, the weight-averaged tagger in averaged/; its log in
# OUTPUT_DIR/memberN.log), the ensemble's tuning-split scores in OUTPUT_DIR/tune and its validation scores in
# OUTPUT_DIR (eval_results.json: seqeval entity-level F1, IOB2; predictions_validation.txt; seen_unseen.json: F1 on
# entities whose words were / were not seen in training).
# SEEDS=42 trains and evaluates a single model. PRETRAIN=true first pretrains the encoder on the training split's text
# and, when DATA has it, Multi30k's English side (`scripts/run_mlm.py`: masked whole words, PRETRAIN_EPOCHS epochs,
# default 6, on all cores; OUTPUT_DIR/encoder, its log OUTPUT_DIR/encoder.log); the members then start from it.
set -euo pipefail
DATA=${1:-../shared/data}; OUT=${2:-outputs/conll}; shift $(( $# < 2 ? $# : 2 ))
PY=${PY:-python}
[ -f "$DATA/conll2003/train.txt" ] || { echo "error: $DATA/conll2003/train.txt not found: give the data directory as the first argument (make recipe-conll DATA=path)" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)  # scripts/ beside recipes/: the recipe runs from any directory
source "$HERE/tcmalloc.sh"
# bf16 autocast where a bf16 matrix product measures >= 1.2x faster than fp32 (training.fast_bf16); fp32 elsewhere
BF16=${BF16:-$("$PY" -c "from vanilla_transformer.training import fast_bf16; print(str(fast_bf16()).lower())")}
echo "bf16 autocast: $BF16"
read -r -a SEEDS <<< "${SEEDS:-42 7}"
MEMBERS=${#SEEDS[@]}
THREADS=${THREADS:-$(( $(nproc) / MEMBERS > 0 ? $(nproc) / MEMBERS : 1 ))}
mkdir -p "$OUT"
SPLIT="$OUT/split"
"$PY" -m vanilla_transformer.cli split-documents "$DATA/conll2003/train.txt" "$SPLIT" --fraction 0.1 --seed 0
set -m  # each job its own process group, so that the trap stops a job's whole tree (its training included)
trap 'for p in $(jobs -p); do kill -- "-$p" 2>/dev/null || true; done' EXIT  # a failed member stops the others

# The encoder's shape: the same for pretraining and the members (a member loads the pretrained encoder as it is)
ENCODER="encoder_layers=4,normalize_before=true,char_cnn_dim=128,relative_attention_max_distance=16"
init=()
if [ "${PRETRAIN:-false}" = true ]; then  # the encoder first learns from unlabelled text: masked words, whole-word
  text=(--train_conll_file "$SPLIT/train.txt")
  [ -f "$DATA/multi30k/train.en" ] && text+=(--train_file "$DATA/multi30k/train.en" --split_punctuation true)
  OMP_NUM_THREADS=$(nproc) "$PY" "$HERE/../scripts/run_mlm.py" "${text[@]}" --vocab_size 8000 \
    --config_name small --config_overrides "$ENCODER,dropout=0.1,attention_dropout=0.1" \
    --per_device_train_batch_size 64 --learning_rate 1e-3 --warmup_steps 500 --lr_scheduler_type cosine \
    --weight_decay 0.01 --max_grad_norm 1.0 --num_train_epochs ${PRETRAIN_EPOCHS:-6} --train_sampling_strategy group_by_length \
    --bf16 "$BF16" --save_strategy epoch --save_total_limit 1 --logging_steps 200 --seed 0 \
    --do_train --do_eval --output_dir "$OUT/encoder" > "$OUT/encoder.log" 2>&1 || { tail -n 40 "$OUT/encoder.log"; exit 1; }
  grep -ho "'train_wall_seconds': [0-9.]*" "$OUT/encoder.log" | sed "s/^/pretraining: /"
  init=(--model_name_or_path "$OUT/encoder")
fi

pids=()
for i in $(seq 1 "$MEMBERS"); do
  OMP_NUM_THREADS=$THREADS "$PY" "$HERE/../scripts/run_ner.py" \
    --train_file "$SPLIT/train.txt" --validation_file "$SPLIT/tune.txt" --vocab_size 8000 \
    --config_name small --config_overrides "$ENCODER,dropout=0.3,attention_dropout=0.1,use_crf=true,token_dropout=0.25" \
    --mention_replacement 0.3 --auxiliary_columns true \
    --per_device_train_batch_size 16 --learning_rate 5e-4 --warmup_steps 2000 \
    --lr_scheduler_type cosine_with_min_lr --lr_scheduler_kwargs '{"min_lr_rate": 0.2}' \
    --label_all_tokens true --weight_decay 0.01 --max_grad_norm 1.0 --num_train_epochs 25 --train_sampling_strategy group_by_length --bf16 "$BF16" \
    --save_strategy epoch --save_total_limit 5 --logging_steps 200 --seed ${SEEDS[$(( i - 1 ))]} \
    ${init[@]+"${init[@]}"} --do_train --do_eval --output_dir "$OUT/member$i" "$@" > "$OUT/member$i.log" 2>&1 &
  pids+=("$!")
  echo "member $i: training on $THREADS thread(s), log $OUT/member$i.log"
done
for i in $(seq 1 "$MEMBERS"); do
  wait "${pids[$(( i - 1 ))]}" || { tail -n 40 "$OUT/member$i.log"; echo "member $i failed" >&2; exit 1; }
  grep -ho "'train_wall_seconds': [0-9.]*" "$OUT/member$i.log" | sed "s/^/member $i: /"
done

# Stochastic weight averaging (Izmailov et al., 2018): the learning rate ends at a fifth of its peak instead of zero,
# and each member is the mean of its last five epoch checkpoints (OUTPUT_DIR/memberN/averaged; a run that saved no
# checkpoints keeps its final weights).
taggers=()
for i in $(seq 1 "$MEMBERS"); do
  saved=$(find "$OUT/member$i" -maxdepth 1 -type d -name 'checkpoint-*' | wc -l)  # (none: 0, under pipefail too)
  if [ "$saved" -gt 0 ]; then  # the last five, or as many as a shorter run saved
    "$PY" -m vanilla_transformer.cli average-checkpoints "$OUT/member$i" --last $(( saved < 5 ? saved : 5 )) \
      --output_dir "$OUT/member$i/averaged" --force
    taggers+=("$OUT/member$i/averaged")
  else
    echo "member $i: no checkpoints saved, its final weights are evaluated"
    taggers+=("$OUT/member$i")
  fi
done
ensemble=(--model_name_or_path "${taggers[0]}" ${taggers[1]+--ensemble_with "${taggers[@]:1}"})
evaluate() {  # FILE DIR: the ensemble's scores on FILE, overall and for entities seen / unseen in training
  "$PY" "$HERE/../scripts/run_ner.py" "${ensemble[@]}" --validation_file "$1" --document_consistency true --do_eval --output_dir "$2"
  "$PY" -m vanilla_transformer.cli ner-report "$2/predictions_validation.txt" --train_file "$SPLIT/train.txt" \
    --json "$2/seen_unseen.json"
}
evaluate "$SPLIT/tune.txt" "$OUT/tune"
evaluate "$DATA/conll2003/validation.txt" "$OUT"  # validation: once, at the end
