#!/usr/bin/env bash
# Train on this machine: one process per GPU, or NPROC processes on CPU (gloo).
# Usage: launch/torchrun.sh [train.py options...]   e.g. NPROC=2 launch/torchrun.sh --device cpu
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${NPROC:-}" ]; then
    NPROC=$(nvidia-smi --list-gpus 2>/dev/null | wc -l || true)
    [ "${NPROC:-0}" -gt 0 ] || NPROC=2
fi

# torchrun passes these signals on to every worker (train.py then saves a checkpoint and
# exits) and waits SHUTDOWN_TIMEOUT seconds before it kills them. A torchrun without these
# settings (see `torchrun --help`) uses its defaults: no SIGUSR1, 30 seconds.
export PET_SIGNALS_TO_HANDLE="SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"
export TORCH_ELASTIC_SHUTDOWN_TIMEOUT="${SHUTDOWN_TIMEOUT:-120}"

exec torchrun --standalone --nproc-per-node="$NPROC" train.py --config train_config.json "$@"
