#!/usr/bin/env bash
# The biLM that the task experiments build on (docs/training.md, "The corpus biLM"): the `cpu` architecture trained
# on ../shared/data/lm (Gutenberg books + Reuters-21578 + BBC News, 32.4M training tokens) for at most 2 hours on
# this 2-core machine, then exported to the original format and scored on each corpus' validation file.
#
# Usage: experiments/corpus.sh [LM_DIR] [RUN_DIR] [MAX_STEPS]   (defaults: ../shared/data/lm, runs/corpus, 5200)
# Resumable: after an interruption, rerun the same command and training continues from its newest checkpoint.
#
# A 2-hour run sees about a quarter of the corpus, so the three training files are cut into shards of ~20k lines:
# the trainer visits shards in a shuffled order, which makes any prefix of the epoch a mix of books and news. The
# news shards are listed twice (the news up-weighted 2x: CoNLL-2003 is Reuters text).
set -euo pipefail
lm=${1:-../shared/data/lm}
run=${2:-runs/corpus}
max_steps=${3:-5200}
elmo=${ELMO:-elmo}
shards=$run.shards
if [ ! -f "$shards/.done" ]; then
    rm -rf "$shards" && mkdir -p "$shards"
    gzip -dc "$lm/gutenberg/gutenberg.train.txt.gz" | split -l 20000 -d -a 3 - "$shards/gutenberg-"
    for news in reuters21578 bbcnews; do
        split -l 20000 -d -a 3 "$lm/$news/$news.train.txt" "$shards/$news-"
        for f in "$shards/$news-"*; do cp "$f" "$f.copy2"; done
    done
    touch "$shards/.done"
fi
[ -f "$run.vocab.txt" ] || "$elmo" vocab "$shards"/'*' -o "$run.vocab.txt" --min-count 3 --max-size 100000
resume=()
[ -d "$run/checkpoints" ] && resume=(--resume)
# One thread: a 2-thread run slows to a crawl whenever anything else wants a core (docs/training.md).
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} "$elmo" train --config cpu --train "$shards"/'*' \
    --valid "$lm/bbcnews/bbcnews.valid.txt" --vocab "$run.vocab.txt" --out "$run" --max-steps "$max_steps" \
    --optimizer adam --learning-rate 0.002 --lr-schedule linear --warmup-steps 200 \
    --eval-every 1000 --checkpoint-every 250 --no-progress "${resume[@]}"
"$elmo" export "$run" "$run-export"
for valid in gutenberg reuters21578 bbcnews; do
    "$elmo" perplexity --model "$run-export" --data "$lm/$valid/$valid.valid.txt" --json | tee "$run-$valid.json"
done
