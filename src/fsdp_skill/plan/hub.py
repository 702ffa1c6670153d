"""Resolve ``--model ID``: a bundled config by short name, else transformers' AutoConfig.

AutoConfig reads the local Hugging Face cache first and the hub when it can reach it; this
module is the only part of the planner that imports transformers.
"""

from __future__ import annotations

from typing import Any

from fsdp_skill.errors import UsageError
from fsdp_skill.plan import bundled


def resolve(model_id: str) -> tuple[dict[str, Any], str]:
    """The config dict of ``model_id`` and where it came from ("bundled" or "transformers")."""
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
    try:
        config = AutoConfig.from_pretrained(model_id)
    except Exception as exc:  # transformers raises OSError, ValueError, HTTP errors...
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(
            f"cannot load the config of {model_id!r} from the local cache or the hub ({reason}); "
            "offline, download its config.json and pass --model-config config.json"
        ) from None
    data = config.to_dict()
    # Composite configs (e.g. multimodal) keep the language model under text_config.
    if "hidden_size" not in data and isinstance(data.get("text_config"), dict):
        data = data["text_config"]
    return data, "transformers"
