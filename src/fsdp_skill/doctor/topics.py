"""``env --for TOPIC``: the variables to export for one investigation, and what each shows.

The descriptions come from the knowledge (``knowledge/env_vars.toml``) when it describes the
variable; the short list below names which variables belong to which investigation, with
the value to set, and carries a description of its own for variables the knowledge lacks.
"""

from __future__ import annotations

from dataclasses import dataclass

from fsdp_skill.doctor import varinfo
from fsdp_skill.doctor.advice import NCCL_ENV_DOCS
from fsdp_skill.knowledge import in_range

TORCH_DEBUG_DOCS = (
    "https://docs.pytorch.org/docs/stable/distributed.html#debugging-torch-distributed-applications"
)
TORCH_FR_DOCS = "https://docs.pytorch.org/tutorials/prototype/flight_recorder_tutorial.html"
NCCL_LOG_DOCS = (
    "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/logging.html"
)


@dataclass(frozen=True)
class Export:
    """One variable to export for a topic."""

    name: str
    value: str
    shows: str
    source: str
    backend: str = "any"
    """``nccl`` (GPU jobs only), ``gloo`` or ``any``."""


TOPICS: dict[str, tuple[Export, ...]] = {
    "hang": (
        Export(
            "TORCH_NCCL_TRACE_BUFFER_SIZE",
            "2000",
            "turns on the flight recorder: each rank keeps its last 2000 collectives (op, sizes, "
            "sequence number, state) so a hang can be traced to the rank that diverged (newer "
            "torch also reads it as TORCH_FR_BUFFER_SIZE)",
            TORCH_FR_DOCS,
            "nccl",
        ),
        Export(
            "TORCH_NCCL_DUMP_ON_TIMEOUT",
            "1",
            "writes every rank's flight-recorder buffer to a file when the watchdog times out",
            TORCH_FR_DOCS,
            "nccl",
        ),
        Export(
            # The name read since 2.5; newer torch also reads TORCH_FR_DUMP_TEMP_FILE.
            "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
            "/tmp/nccl_trace_rank_",
            "where the dumps go: one file per rank, this prefix plus the rank number "
            "(feed them to `fsdp-skill hang`)",
            TORCH_FR_DOCS,
            "nccl",
        ),
        Export(
            "TORCH_DISTRIBUTED_DEBUG",
            "DETAIL",
            "checks that every rank calls the same collective with the same shapes and reports "
            "the mismatch instead of hanging (slow: for reproducing, not for production)",
            TORCH_DEBUG_DOCS,
        ),
        Export(
            "TORCH_CPP_LOG_LEVEL",
            "INFO",
            "lets the C++ messages of TORCH_DISTRIBUTED_DEBUG through (they are C++ logs)",
            TORCH_DEBUG_DOCS,
        ),
        Export(
            "NCCL_DEBUG",
            "INFO",
            "NCCL's version, the transports it chose and the error that stopped a collective",
            NCCL_LOG_DOCS,
            "nccl",
        ),
        Export(
            "NCCL_DEBUG_FILE",
            "/tmp/nccl.%h.%p.log",
            "one NCCL log per process (%h host, %p pid) instead of interleaved output",
            NCCL_LOG_DOCS,
            "nccl",
        ),
    ),
    "init": (
        Export(
            "TORCH_CPP_LOG_LEVEL",
            "INFO",
            "torch's C++ logs, including the rendezvous and store connection steps",
            TORCH_DEBUG_DOCS,
        ),
        Export(
            "TORCH_DISTRIBUTED_DEBUG",
            "INFO",
            "extra logging from torch.distributed while process groups are created",
            TORCH_DEBUG_DOCS,
        ),
        Export(
            "NCCL_DEBUG",
            "INFO",
            "NCCL's version and every step of communicator creation",
            NCCL_LOG_DOCS,
            "nccl",
        ),
        Export(
            "NCCL_DEBUG_SUBSYS",
            "INIT,NET",
            "limits NCCL's log to initialisation and networking: which interface and transport "
            "(IB, socket) it picked to reach the other ranks",
            NCCL_ENV_DOCS,
            "nccl",
        ),
        Export(
            "TORCH_SHOW_CPP_STACKTRACES",
            "1",
            "adds the C++ stack to errors raised from torch's distributed C++ code",
            TORCH_DEBUG_DOCS,
        ),
    ),
    "perf": (
        Export(
            "NCCL_DEBUG",
            "INFO",
            "the transport used between each pair of ranks (P2P/NVLink, SHM, NET/IB, "
            "NET/Socket): a socket where you expected InfiniBand explains slow collectives",
            NCCL_LOG_DOCS,
            "nccl",
        ),
        Export(
            "NCCL_DEBUG_SUBSYS",
            "INIT,GRAPH,TUNING",
            "the rings and trees NCCL built, its channel count and algorithm choices",
            NCCL_ENV_DOCS,
            "nccl",
        ),
        Export(
            "NCCL_SOCKET_NTHREADS",
            "4",
            "more CPU threads per socket connection: raises bandwidth over plain Ethernet "
            "(its product with NCCL_NSOCKS_PERTHREAD must stay at most 64)",
            NCCL_ENV_DOCS,
            "nccl",
        ),
        Export(
            "NCCL_NSOCKS_PERTHREAD",
            "4",
            "more sockets per thread for the same reason; try it only on socket transports",
            NCCL_ENV_DOCS,
            "nccl",
        ),
    ),
    "topology": (
        Export(
            "NCCL_DEBUG",
            "INFO",
            "NCCL's view of the machine: GPUs, NICs, and the paths between them",
            NCCL_LOG_DOCS,
            "nccl",
        ),
        Export(
            "NCCL_DEBUG_SUBSYS",
            "INIT,GRAPH",
            "the topology NCCL detected and the rings/trees it built over it",
            NCCL_ENV_DOCS,
            "nccl",
        ),
        Export(
            "NCCL_TOPO_DUMP_FILE",
            "/tmp/nccl_topo.xml",
            "writes the detected topology (PCI tree, NVLink, NICs) as XML",
            NCCL_ENV_DOCS,
            "nccl",
        ),
    ),
}


def advice(
    topic: str, backend: str, env: dict[str, str] | None = None, torch_version: str | None = None
) -> dict:
    """The exports for ``topic``, with each variable's meaning, for a job on ``backend``.

    ``env`` holds the variables set now: each export says its current value, if any. A
    variable the knowledge dates after ``torch_version`` does not apply.
    """
    known = varinfo.known()
    exports = []
    for item in TOPICS[topic]:
        entry = known.get(item.name)
        shows, source, when, scope = item.shows, item.source, "", item.backend
        if entry is not None:
            scope = getattr(entry, "backend", "") or scope
            shows = getattr(entry, "shows", "") or getattr(entry, "what", "") or shows
            source = getattr(entry, "source", "") or source
            when = getattr(entry, "when", "")
        applies = scope in ("any", backend)
        since = varinfo.since(entry)
        too_old = bool(since and torch_version and not in_range(torch_version, since))
        exports.append(
            {
                "name": item.name,
                "value": item.value,
                "shows": shows,
                "when": when,
                "source": source,
                "applies": applies and not too_old,
                "needs_torch": f">={since}" if too_old else None,
                "current": (env or {}).get(item.name),
                "described_by": "knowledge" if entry is not None else "fallback",
            }
        )
    shell = "\n".join(f"export {e['name']}={_quote(e['value'])}" for e in exports if e["applies"])
    return {"topic": topic, "backend": backend, "exports": exports, "shell": shell}


def _quote(value: str) -> str:
    return value if all(c.isalnum() or c in "_-./,=%:" for c in value) else f"'{value}'"
