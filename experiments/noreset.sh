#!/usr/bin/env bash
# The corpus biLM's recipe without state resets, for the initial-state table (experiments/initial_state.py): the
# same shards, vocabulary, architecture and optimizer as experiments/corpus.sh, but --state-reset 0, so every row's
# LSTM state is carried from step 0 on and never zeroed, as in the original trainer. Such a model rarely sees a
# zero state in training, which is what the `warm` and `carry` initial states are for.
#
# Usage: experiments/noreset.sh [CORPUS_RUN] [RUN_DIR] [MAX_STEPS]
#   (defaults: runs/corpus, whose .shards and .vocab.txt experiments/corpus.sh made; runs/noreset; 34960, the
#   corpus biLM's steps). Resumable: rerun the same command and training continues from its newest checkpoint;
#   stop it whenever, then `elmo export RUN_DIR RUN_DIR-export`.
set -euo pipefail
corpus=${1:-runs/corpus}
run=${2:-runs/noreset}
max_steps=${3:-34960}
elmo=${ELMO:-elmo}
resume=()
[ -d "$run/checkpoints" ] && resume=(--resume)
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} "$elmo" train --config cpu --train "$corpus.shards"/'*' \
    --valid ../shared/data/lm/bbcnews/bbcnews.valid.txt --vocab "$corpus.vocab.txt" --out "$run" \
    --max-steps "$max_steps" --state-reset 0 --eval-every 1000 --checkpoint-every 250 --no-progress "${resume[@]}"
