#!/usr/bin/env bash
# The biLM that the task experiments build on (its run: docs/benchmarks/training.md): the `cpu` architecture trained
# on ../shared/data/lm (Gutenberg books + Reuters-21578 + BBC News, 32.4M training tokens) for at most 2 hours on
# this 2-core machine (13,400 steps: 119 minutes on 2 threads), then exported to the original format and
# scored on each corpus' validation file (Gutenberg's last: its 428k words took 16 minutes on one core).
#
# Usage: experiments/corpus.sh [LM_DIR] [RUN_DIR] [MAX_STEPS]   (defaults: ../shared/data/lm, runs/corpus, 13400)
# Resumable: after an interruption, rerun the same command and training continues from its newest checkpoint.
#
# A 2-hour run sees a fraction of one pass over the corpus, and the trainer reads one shard at a time (shards in a
# shuffled order, sentences shuffled within a shard). So every shard must be a sample of the whole corpus: the
# lines of all three files are dealt round-robin into 80 shards (cut into consecutive pieces, each shard of the
# book-ordered Gutenberg file would hold one or two books). The news is dealt twice (up-weighted 2x: CoNLL-2003 is
# Reuters text).
#
# The optimizer is the original's (the `cpu` preset: Adagrad, lr 0.2, initial accumulator 1.0).
#
# --state-reset 0.05 zeroes a row's carried LSTM state before 5% of the windows. The original starts a row from
# zeros only at step 0; such a model, started from zeros (stateless embedding, `elmo perplexity`), can fall into a
# saturated state it never leaves: at step 1500 of the Adagrad run without resets, started from zeros on 200 BBC
# News validation sentences, 29% of the memory cells ended at the clip and forward perplexity was 1.6e10; started
# from a training row's carried state, the same model scored 630 (docs/benchmarks/training.md, the corpus biLM).
set -euo pipefail
lm=${1:-../shared/data/lm}
run=${2:-runs/corpus}
max_steps=${3:-13400}
elmo=${ELMO:-elmo}
shards=$run.shards
if [ ! -f "$shards/.done" ]; then
    rm -rf "$shards" && mkdir -p "$shards"
    news=("$lm/reuters21578/reuters21578.train.txt" "$lm/bbcnews/bbcnews.train.txt")
    { gzip -dc "$lm/gutenberg/gutenberg.train.txt.gz"; cat "${news[@]}" "${news[@]}"; } \
        | split -n r/80 -d -a 3 - "$shards/shard-"
    touch "$shards/.done"
fi
[ -f "$run.vocab.txt" ] || "$elmo" vocab "$shards"/'*' -o "$run.vocab.txt" --min-count 3 --max-size 100000
resume=()
[ -d "$run" ] && resume=(--resume)  # also a run killed before its first checkpoint
# One thread: a 2-thread run slows to a crawl whenever anything else wants a core (docs/benchmarks/training.md).
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} "$elmo" train --config cpu --train "$shards"/'*' \
    --valid "$lm/bbcnews/bbcnews.valid.txt" --vocab "$run.vocab.txt" --out "$run" --max-steps "$max_steps" \
    --state-reset 0.05 --eval-every 1000 --checkpoint-every 250 --no-progress "${resume[@]}"
"$elmo" export "$run" "$run-export" --force  # a resumed run exports its newest checkpoint again
for valid in bbcnews reuters21578 gutenberg; do
    "$elmo" perplexity --model "$run-export" --data "$lm/$valid/$valid.valid.txt" --json | tee "$run-$valid.json"
done
