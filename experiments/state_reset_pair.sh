#!/usr/bin/env bash
# Two biLMs for the initial-state table (experiments/initial_state.py) that differ in one thing: how often a row's
# carried LSTM state is zeroed in training. Both use experiments/corpus.sh's shards, vocabulary, architecture
# (`cpu` preset) and optimizer and train for the same number of steps:
#   RUN_DIR/reset   --state-reset 0.05  (the corpus biLM's recipe: a row starts from zeros before 5% of windows)
#   RUN_DIR/noreset --state-reset 0     (the original trainer: every row's state is carried from step 0 on)
# A model that rarely sees a zero state in training is what the `warm` and `carry` initial states are for. Each
# run is exported with its softmax (RUN_DIR/<name>-export), which the perplexity column needs.
#
# Usage: experiments/state_reset_pair.sh [CORPUS_RUN] [RUN_DIR] [MAX_STEPS]
#   (defaults: runs/corpus, whose .shards and .vocab.txt experiments/corpus.sh makes; runs/state-reset; 3000)
# Resumable: rerun the same command and each run continues from its newest checkpoint (a finished one is skipped).
set -euo pipefail
corpus=${1:-runs/corpus}
out=${2:-runs/state-reset}
max_steps=${3:-3000}
elmo=${ELMO:-elmo}
[ -f "$corpus.vocab.txt" ] || "$elmo" vocab "$corpus.shards"/'*' -o "$corpus.vocab.txt" --min-count 3 --max-size 100000
for pair in reset:0.05 noreset:0; do
    name=${pair%%:*} reset=${pair#*:}
    run=$out/$name
    [ -f "$run-export/options.json" ] && continue
    resume=()
    [ -d "$run" ] && resume=(--resume)  # also a run killed before its first checkpoint
    # One thread: a 2-thread run slows to a crawl whenever anything else wants a core (docs/benchmarks/training.md).
    OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} "$elmo" train --config cpu --train "$corpus.shards"/'*' \
        --valid ../shared/data/lm/bbcnews/bbcnews.valid.txt --vocab "$corpus.vocab.txt" --out "$run" \
        --max-steps "$max_steps" --state-reset "$reset" --eval-every 1000 --checkpoint-every 250 --no-progress \
        "${resume[@]}"
    "$elmo" export "$run" "$run-export"
done
