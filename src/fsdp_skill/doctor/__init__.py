"""The distributed-environment doctor behind ``fsdp-skill env``.

It reads the machine (torch build, GPUs and their interconnect, InfiniBand, network
interfaces, the distributed variables set now) without importing torch and with every
external command bounded in time, then says which backend to use, which interface variables
to set, and what in the current setup would break or slow a distributed job.
"""

from __future__ import annotations

from fsdp_skill.doctor.host import Host


def env(
    for_topic: str | None = None,
    *,
    host: Host | None = None,
    deep: bool = False,
    deep_timeout: float | None = None,
) -> dict:
    """The environment report as a dict (see DESIGN §3: ``env``).

    ``for_topic`` (``hang``, ``init``, ``perf``, ``topology``) adds the variables to export
    for that investigation. ``deep`` also imports torch in a child process (bounded by
    ``deep_timeout`` seconds) to ask it which backends and devices it can use.
    Raises UsageError for an unknown topic.
    """
    from fsdp_skill.doctor.report import DEEP_TIMEOUT_S, build_report

    return build_report(host, for_topic, deep=deep, deep_timeout=deep_timeout or DEEP_TIMEOUT_S)


__all__ = ["Host", "env"]
