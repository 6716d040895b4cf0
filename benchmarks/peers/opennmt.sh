#!/usr/bin/env bash
# OpenNMT-py 3.5.1 on Multi30k de -> en, in the shape of vanilla-transformer's recipe (recipes/multi30k.sh): the same
# joint BPE pieces (prepare.py), d_model 256, 3+3 layers, 4 heads, d_ff 1024, pre-LN (OpenNMT-py's transformer),
# dropout 0.2, attention dropout 0.1, label smoothing 0.1, Adam (0.9, 0.98) peaking at 1.1e-3 after 800 warm-up steps
# (noam decay: OpenNMT-py has no cosine), batches of at most 1024 tokens, gradient norm clipped at 1, two threads,
# TCMalloc where it is installed.
# Trains for MINUTES minutes, a checkpoint every EVERY steps; score.py then translates each with beam 4 and scores it.
# Usage: benchmarks/peers/opennmt.sh [DATA_DIR] [OUT]    (DATA_DIR holds train.{de,en} and validation.{de,en})
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)  # the repository: the script runs from any directory
shopt -s nullglob
DATA=${1:-../shared/data/multi30k}; OUT=${2:-outputs/peers/opennmt}
MINUTES=${MINUTES:-60}; EVERY=${EVERY:-1000}; PY=${PY:-python}
VENV=${VENV:-outputs/peers/venv-opennmt}
PIECES=${PIECES:-outputs/peers/data}
if [ ! -x "$VENV/bin/onmt_train" ]; then  # its own environment: OpenNMT-py 3.5 needs torch < 2.3 (PyPI's build)
  python3 -m venv "$VENV"
  PIP_CONFIG_FILE=/dev/null "$VENV/bin/pip" install "torch==2.2.2" "OpenNMT-py==3.5.1" "numpy<2"
fi
[ -f "$PIECES/train.de.bpe" ] || "$PY" "$ROOT/benchmarks/peers/prepare.py" "$DATA" "$PIECES"
mkdir -p "$OUT"
source "$ROOT/recipes/tcmalloc.sh"  # the allocator vanilla-transformer's recipes run with, where it is installed
cat > "$OUT/config.yaml" <<YAML
save_data: $OUT/run
src_vocab: $OUT/vocab.shared
share_vocab: true
src_vocab_size: 9000
tgt_vocab_size: 9000
overwrite: true
data:
  corpus_1:
    path_src: $PIECES/train.de.bpe
    path_tgt: $PIECES/train.en.bpe
save_model: $OUT/model
save_checkpoint_steps: $EVERY
keep_checkpoint: -1
seed: 1
train_steps: 1000000
report_every: 50
encoder_type: transformer
decoder_type: transformer
position_encoding: true
enc_layers: 3
dec_layers: 3
heads: 4
hidden_size: 256
word_vec_size: 256
transformer_ff: 1024
dropout: [0.2]
attention_dropout: [0.1]
share_embeddings: true
share_decoder_embeddings: true
label_smoothing: 0.1
optim: adam
adam_beta1: 0.9
adam_beta2: 0.98
decay_method: noam
learning_rate: 0.5
warmup_steps: 800
max_grad_norm: 1.0
param_init: 0
param_init_glorot: true
batch_type: tokens
batch_size: 1024
normalization: tokens
accum_count: [1]
num_workers: 0
world_size: 1
YAML
"$VENV/bin/onmt_build_vocab" -config "$OUT/config.yaml" -n_sample -1 > "$OUT/build_vocab.log" 2>&1
date +%s > "$OUT/start_time"
OMP_NUM_THREADS=2 timeout "$((MINUTES * 60))" "$VENV/bin/onmt_train" -config "$OUT/config.yaml" > "$OUT/train.log" 2>&1 \
  || [ $? -eq 124 ]  # stopped by the clock, as intended
for checkpoint in "$OUT"/model_step_*.pt; do
  OMP_NUM_THREADS=2 "$VENV/bin/onmt_translate" -model "$checkpoint" -src "$PIECES/validation.de.bpe" \
    -output "${checkpoint%.pt}.hyp" -beam_size 4 -batch_size 64 -batch_type sents > /dev/null 2>&1
done
"$PY" "$ROOT/benchmarks/peers/score.py" "$OUT" "$PIECES/validation.en" --system "OpenNMT-py 3.5.1"
