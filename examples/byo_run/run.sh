#!/usr/bin/env bash
# Bring your own run, end to end (README "Bring your own run"): train a small MLP with DDP on
# 2 gloo processes, profiled; import the profile and the loss log as a trace (and the network
# its own all-reduces measured, traces/measured.yaml, and the ranks' stragglers); replay it on a
# preset, on that measured network and on the loopback calibrated apart from training; compare
# the predicted step with the measured.
# Usage: bash examples/byo_run/run.sh [OUT]   (from the repository root, ~2 minutes on 2 cores)
set -euo pipefail
OUT=${1:-out/byo_run}
BIN=${BIN:-.venv/bin}
"$BIN/python" examples/byo_run/train.py -o "$OUT"
"$BIN/transitsim" traces import --name byo-mlp -o "$OUT/traces" \
    --profile "$OUT/profile/rank0.pt.trace.json.gz" \
    --profile "$OUT/profile/rank1.pt.trace.json.gz" \
    --loss "$OUT/losses.csv"
"$BIN/transitsim" replay "$OUT/traces" --network 8x200g-switch --overlap buckets -o "$OUT/preset"
"$BIN/transitsim" replay "$OUT/traces" --network "$OUT/traces/measured.yaml" --overlap buckets \
    --stragglers-from "$OUT/traces" -o "$OUT/measured"
"$BIN/transitsim" replay "$OUT/traces" --network "$OUT/loopback.yaml" --overlap buckets \
    --stragglers-from "$OUT/traces" -o "$OUT/loopback"
"$BIN/python" examples/byo_run/compare.py "$OUT"
