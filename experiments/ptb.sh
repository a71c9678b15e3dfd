#!/usr/bin/env bash
# The PTB recipe of docs/training.md (its runs: docs/benchmarks/training.md): vocabulary, training with the `ptb`
# preset (about 1 hour 45 minutes on 2 CPU cores with bf16 units, e.g. AVX512-BF16), export to the original format,
# full-softmax perplexity of the export (one stream).
# Usage: experiments/ptb.sh [PTB_DIR] [RUN_DIR]   (defaults: ../shared/data/lm/ptb, runs/ptb)
# Resumable: after an interruption, rerun the same command and training continues from its newest checkpoint.
set -euo pipefail
data=${1:-../shared/data/lm/ptb}
run=${2:-runs/ptb}
elmo=${ELMO:-elmo}
mkdir -p "$(dirname "$run")"
[ -f "$run.vocab.txt" ] || "$elmo" vocab "$data/ptb.train.txt" -o "$run.vocab.txt"
resume=()
[ -d "$run" ] && resume=(--resume)  # also a run killed before its first checkpoint
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "$elmo" train --config ptb --train "$data/ptb.train.txt" \
    --valid "$data/ptb.valid.txt" --vocab "$run.vocab.txt" --out "$run" --no-progress "${resume[@]}"
"$elmo" export "$run" "$run-export" --force  # a resumed run exports its newest checkpoint again
"$elmo" perplexity --model "$run-export" --data "$data/ptb.valid.txt" --json | tee "$run-valid.json"
