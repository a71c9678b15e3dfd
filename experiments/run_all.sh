#!/usr/bin/env bash
# Every table and figure of docs/benchmarks/tasks.md.
# Usage: experiments/run_all.sh BILM_DIR LM_TRAIN.txt [--quick] [--device cuda]
# Runs are resumable: rerun the same command after an interruption and finished runs are reused.
set -euo pipefail
bilm=$1; corpus=$2; shift 2
here=$(dirname "$0")
py=${PYTHON:-python}
for script in table1_baseline_vs_elmo table2_layers_and_lambda table3_elmo_position fig1_sample_efficiency \
              fig2_layer_weights; do
  "$py" "$here/$script.py" --bilm "$bilm" --corpus "$corpus" "$@"
done
