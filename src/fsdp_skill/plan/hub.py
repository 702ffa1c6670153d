"""Resolve ``--model ID``: a bundled config by short name, else transformers' AutoConfig.

AutoConfig reads a local folder or the local Hugging Face cache first and the hub only when
it can be reached; this module is the only part of the planner that imports transformers.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

from fsdp_skill.errors import UsageError
from fsdp_skill.plan import bundled


def _offline_hint() -> str:
    return (
        "download its config.json and pass --model-config config.json, or use a bundled "
        f"name ({', '.join(bundled.names())})"
    )


def resolve(model_id: str, local_paths: bool = True) -> tuple[dict[str, Any], str]:
    """The config dict of ``model_id`` and where it came from ("bundled" or "transformers").

    ``local_paths`` False: ``model_id`` is looked up in the hub (and its local cache) only,
    never read as a local folder or file, whatever the working directory holds.
    """
    local = bundled.load(model_id)
    if local is not None:
        return local, "bundled"
    try:
        from transformers import AutoConfig
    except ImportError:
        raise UsageError(
            f"--model {model_id} needs transformers installed; pass --model-config config.json "
            f"or a bundled name ({', '.join(bundled.names())})"
        ) from None
    load = AutoConfig.from_pretrained if local_paths else _from_hub_only
    with _quiet_hub():
        try:
            config = load(model_id, local_files_only=True)
        except Exception:  # not cached: try the hub below
            config = None
        if config is None:
            if not _hub_reachable():
                raise UsageError(
                    f"{model_id!r} is not in the local cache and the hub cannot be reached "
                    f"(offline); {_offline_hint()}"
                )
            try:
                config = load(model_id)
            except Exception as exc:  # transformers raises OSError, ValueError, HTTP errors...
                text = str(exc).strip()
                reason = text.splitlines()[0] if text else type(exc).__name__
                raise UsageError(
                    f"cannot load the config of {model_id!r} ({reason}); {_offline_hint()}"
                ) from None
    return config.to_dict(), "transformers"


def _from_hub_only(model_id: str, local_files_only: bool = False) -> Any:
    """AutoConfig of a hub repository, fetched (or taken from the cache) by repository id:
    unlike ``AutoConfig.from_pretrained(model_id)`` it never reads ``model_id`` as a path."""
    from huggingface_hub import hf_hub_download
    from transformers import AutoConfig

    file = hf_hub_download(model_id, "config.json", local_files_only=local_files_only)
    return AutoConfig.from_pretrained(file)


def _hub_reachable(timeout: float = 3.0) -> bool:
    """False when the hub is switched off or its host name does not resolve."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    try:
        from huggingface_hub import constants

        host = urlparse(constants.ENDPOINT).hostname
    except Exception:
        return True  # let transformers decide
    if not host:
        return True
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(timeout)
    try:
        socket.getaddrinfo(host, 443)
        return True
    except OSError:
        return False
    finally:
        socket.setdefaulttimeout(previous)


@contextlib.contextmanager
def _quiet_hub() -> Iterator[None]:
    """Keep the hub client's retry warnings off the terminal: errors come back as one line."""
    logger = logging.getLogger("huggingface_hub")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
