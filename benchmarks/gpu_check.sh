#!/usr/bin/env bash
# The GPU path in one run, one table (parts in benchmarks/gpu_check.py, each its own process):
#   1. parity on the device: bilm-tf's fixture within 1e-5 in fp32; bf16 cosine to fp32 >= 0.999 (mean)
#   2. `elmo embed`'s Embedder over 20,000 real sentences, the original architecture with random weights,
#      fp32 (--pipeline auto), and bf16 with the pipeline on and off: tokens/s, peak GPU memory, and the
#      pipeline's overlap and host buffers
#   3. 200 training steps of the original architecture with sampled softmax: tokens/s and peak memory
#   4. `elmo train` under a 1-process torchrun (NCCL on CUDA)
#   5. on the GPU only: the training of 3 again with large batches (1024 rows), eager and through torch.compile
# Finishes within 8 minutes on one H200-class GPU (each part is stopped after PART_TIMEOUT seconds, 150 on the GPU,
# and becomes a failed row). Exit status 1 if a check failed.
#
#   benchmarks/gpu_check.sh                 # on CUDA, full sizes
#   DEVICE=cpu benchmarks/gpu_check.sh      # toy sizes on the CPU (gloo, tiny architecture, a few
#                                           # sentences and steps): what tests/benchmarks/test_gpu_check.py runs
# Environment: PYTHON (default: python), ELMO_DATA (the shared data folder; default ../shared/data beside the
# repo; without it the sentences are the repo's own Markdown lines), ELMO_FIXTURE (the bilm-tf fixture; default
# ../shared/reference/bilm-tf-fixture; without it parity is reported as skipped), KEEP (a folder to keep the
# results and run directories in; default: a temporary one, removed at the end).
set -euo pipefail

DEVICE=${DEVICE:-cuda}
PYTHON=${PYTHON:-python}
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"

if [[ $DEVICE == cpu ]]; then
    CONFIG=tiny SENTENCES=40 STEPS=4 LOG_EVERY=1 TRAIN_PRECISION=fp32 TRAIN_BATCH=4 RUN_STEPS=2
    EMBED_BATCH=64 EMBED_TOKENS=4096  # elmo embed's defaults
    LARGE_BATCH=  PART_TIMEOUT=${PART_TIMEOUT:-0}
else  # large sorted batches for the GPU
    CONFIG=original SENTENCES=20000 STEPS=200 LOG_EVERY=20 TRAIN_PRECISION=bf16 TRAIN_BATCH=128 RUN_STEPS=20
    EMBED_BATCH=1024 EMBED_TOKENS=65536
    LARGE_BATCH=1024 PART_TIMEOUT=${PART_TIMEOUT:-150}
fi

if [[ -n ${KEEP:-} ]]; then
    work=$KEEP
    mkdir -p "$work"
else
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
fi
results=$work/results.jsonl
: > "$results"
# a part that fails (an exception, a crash) becomes a failed row, and the script goes on to the next
fail() {  # check, message
    printf '{"check": "%s", "ok": false, "result": "failed: %s"}\n' "$1" "$(echo "$2" | tr -d '\\' | tr '"|' "'/")" \
        >> "$results"
}
part() {  # name, arguments
    local name=$1 log
    log=$(mktemp "$work/$name.XXXX.log")
    shift
    if ! timeout "$PART_TIMEOUT" "$PYTHON" benchmarks/gpu_check.py "$name" "$@" --results "$results" 2> "$log"; then
        fail "$name $*" "$(tail -n 1 "$log") (after at most ${PART_TIMEOUT}s; 0: no limit)"
    fi
    cat "$log" >&2
}

part parity --device "$DEVICE"
# fp32 as elmo embed runs it (--pipeline auto); bf16 with the pipeline on and off, for its overlap and its gain
for run in "fp32 auto" "bf16 on" "bf16 off"; do
    read -r precision pipeline <<< "$run"
    part embed --device "$DEVICE" --config "$CONFIG" --sentences "$SENTENCES" --precision "$precision" \
        --pipeline "$pipeline" --batch-size "$EMBED_BATCH" --max-batch-tokens "$EMBED_TOKENS"
done
part train --device "$DEVICE" --config "$CONFIG" --steps "$STEPS" --log-every "$LOG_EVERY" \
    --precision "$TRAIN_PRECISION" --batch-size "$TRAIN_BATCH" --sentences "$SENTENCES" \
    --corpus "$work/corpus" --out "$work/train-run"

# `elmo train` as a user starts it on one GPU under torchrun (NCCL on CUDA, gloo on the CPU)
backend=$([[ $DEVICE == cpu ]] && echo gloo || echo nccl)
start=$(date +%s)
check="elmo train, 1-process torchrun ($backend)"
if timeout "$PART_TIMEOUT" "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node 1 -m elmo train --config "$CONFIG" \
        --train "$work/corpus/train.txt" --vocab "$work/corpus/vocab.txt" --out "$work/torchrun-run" \
        --max-steps "$RUN_STEPS" --batch-size "$TRAIN_BATCH" --device "$DEVICE" --no-progress \
        > "$work/torchrun.log" 2>&1; then
    printf '{"check": "%s", "ok": true, "result": "%s steps in %s s"}\n' "$check" "$RUN_STEPS" \
        "$(( $(date +%s) - start ))" >> "$results"
else
    fail "$check" "$(tail -n 1 "$work/torchrun.log")"
fi

if [[ -n $LARGE_BATCH ]]; then  # what large batches and compiling buy on the GPU
    for compiled in "" --compile; do
        part train --device "$DEVICE" --config "$CONFIG" --steps "$STEPS" --log-every "$LOG_EVERY" \
            --precision "$TRAIN_PRECISION" --batch-size "$LARGE_BATCH" --sentences "$SENTENCES" \
            --corpus "$work/corpus" --out "$work/train-run-large$compiled" $compiled
    done
fi

"$PYTHON" benchmarks/gpu_check.py table --results "$results"
