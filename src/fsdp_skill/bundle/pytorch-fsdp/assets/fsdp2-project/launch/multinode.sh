#!/usr/bin/env bash
# Train on several machines: run this same command on every node.
#   NNODES=2 MASTER_ADDR=node0.example MASTER_PORT=29500 launch/multinode.sh [train.py options...]
# All nodes must see the project folder and the checkpoint folder at the same path (a shared
# file system): every rank writes its own shards of each checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${NNODES:?set NNODES to the number of machines}"
: "${MASTER_ADDR:?set MASTER_ADDR to the host name of one of the machines}"
MASTER_PORT="${MASTER_PORT:-29500}"
NPROC="${NPROC:-$(nvidia-smi --list-gpus | wc -l)}"
RDZV_ID="${RDZV_ID:-fsdp-train}"

# Name the network interface when the default route is not the fast fabric, for example:
#   export NCCL_SOCKET_IFNAME=ib0 GLOO_SOCKET_IFNAME=ib0
# torchrun passes these signals on to every worker (train.py then saves a checkpoint and
# exits) and waits SHUTDOWN_TIMEOUT seconds before it kills them. A torchrun without these
# settings (see `torchrun --help`) uses its defaults: no SIGUSR1, 30 seconds.
export PET_SIGNALS_TO_HANDLE="SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"
export TORCH_ELASTIC_SHUTDOWN_TIMEOUT="${SHUTDOWN_TIMEOUT:-120}"

exec torchrun \
    --nnodes="$NNODES" \
    --nproc-per-node="$NPROC" \
    --rdzv-backend=c10d \
    --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" \
    --rdzv-id="$RDZV_ID" \
    train.py --config train_config.json "$@"
