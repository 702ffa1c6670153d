#!/usr/bin/env bash
# Train on this machine: one process per GPU, or NPROC processes on CPU (gloo).
# Usage: launch/torchrun.sh [train.py options...]   e.g. NPROC=2 launch/torchrun.sh --device cpu
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${NPROC:-}" ]; then
    NPROC=$(nvidia-smi --list-gpus 2>/dev/null | wc -l || true)
    [ "${NPROC:-0}" -gt 0 ] || NPROC=2
fi

# torchrun passes these signals on to every worker; train.py then saves a checkpoint and
# exits. Workers get 30 seconds before torchrun kills them.
export TORCHELASTIC_SIGNALS_TO_HANDLE="SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"

exec torchrun --standalone --nproc-per-node="$NPROC" train.py --config train_config.json "$@"
