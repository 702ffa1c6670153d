"""Probe the installed accelerate and transformers with configuration values, to learn what
each FSDP key really does: honoured, ignored or rejected, for each FSDP version, and which
values are accepted.

``accelerate launch`` turns the ``fsdp_config:`` section of a config file into ``FSDP_*``
variables, and ``FullyShardedDataParallelPlugin`` reads them back; ``TrainingArguments`` turns
its ``fsdp_config`` into plugin arguments. Reading their source tells only part of the story
(the launcher always exports ``FSDP_SHARDING_STRATEGY``, which makes FSDP1 ignore
``fsdp_reshard_after_forward``), so this module runs them: for every key, once without it
and once with a value that differs from the default, and compares the plugins they build.

The probe values below are test inputs, not facts: the facts are the outcomes, which land in
``knowledge/hf_fsdp_keys.toml``. Everything here imports accelerate, transformers and torch
inside the functions; lint never calls it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

HONOURED, IGNORED, REJECTED = "honoured", "ignored", "rejected"

# A value of each accelerate config key that differs from what the file gets without the key,
# per FSDP version, and the other keys it needs to matter at all.
ACCELERATE_PROBES: dict[str, tuple[dict[int, object], dict[str, object]]] = {
    "fsdp_offload_params": ({1: True, 2: True}, {}),
    "fsdp_min_num_params": ({1: 12345, 2: 12345}, {"fsdp_auto_wrap_policy": "SIZE_BASED_WRAP"}),
    "fsdp_sharding_strategy": ({1: "SHARD_GRAD_OP", 2: "SHARD_GRAD_OP"}, {}),
    "fsdp_reshard_after_forward": ({1: "SHARD_GRAD_OP", 2: False}, {}),
    "fsdp_auto_wrap_policy": ({1: "SIZE_BASED_WRAP", 2: "SIZE_BASED_WRAP"}, {}),
    "fsdp_transformer_layer_cls_to_wrap": (
        {1: "ProbeLayer", 2: "ProbeLayer"},
        {"fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP"},
    ),
    "fsdp_backward_prefetch": ({1: "BACKWARD_POST", 2: "BACKWARD_POST"}, {}),
    "fsdp_state_dict_type": ({1: "SHARDED_STATE_DICT", 2: "FULL_STATE_DICT"}, {}),
    "fsdp_forward_prefetch": ({1: True, 2: True}, {}),
    "fsdp_use_orig_params": ({1: False, 2: False}, {}),
    "fsdp_cpu_ram_efficient_loading": ({1: True, 2: True}, {"fsdp_sync_module_states": True}),
    "fsdp_sync_module_states": ({1: True, 2: True}, {}),
    "fsdp_activation_checkpointing": ({1: True, 2: True}, {}),
    "fsdp_activation_checkpointing_offload": (
        {1: True, 2: True},
        {"fsdp_activation_checkpointing": True},
    ),
    "fsdp_ignored_modules": ({1: "probe_module", 2: "probe_module"}, {}),
}
# What every probe starts from: the smallest file the launcher accepts.
BASE_FSDP_CONFIG = {"fsdp_sync_module_states": False, "fsdp_cpu_ram_efficient_loading": False}
# Keys whose value is one name out of a fixed set (the others are booleans, numbers or names
# of the user's own classes).
NAMED_VALUE_KEYS = (
    "fsdp_sharding_strategy",
    "fsdp_reshard_after_forward",
    "fsdp_auto_wrap_policy",
    "fsdp_backward_prefetch",
    "fsdp_state_dict_type",
)
TRAINER_PROBES: dict[str, tuple[object, dict[str, object]]] = {
    "transformer_layer_cls_to_wrap": (
        ["ProbeLayer"],
        {"auto_wrap_policy": "TRANSFORMER_BASED_WRAP"},
    ),
    "min_num_params": (12345, {"auto_wrap_policy": "SIZE_BASED_WRAP"}),
}
TRAINER_NAMED_VALUE_KEYS = ("auto_wrap_policy", "state_dict_type", "backward_prefetch")
BOOL_CANDIDATES = ("true", "false", "yes", "no", "on", "off", "y", "n", "t", "f", "1", "0")


def candidate_names() -> list[str]:
    """Every name accelerate's constants or torch's FSDP enums offer for a named value."""
    from accelerate.utils import constants
    from torch.distributed.fsdp import BackwardPrefetch, ShardingStrategy, StateDictType

    names: set[str] = set()
    for attr in dir(constants):
        value = getattr(constants, attr)
        if attr.startswith("FSDP") and isinstance(value, list):
            names |= {v for v in value if isinstance(v, str) and v.isupper()}
    for enum in (BackwardPrefetch, ShardingStrategy, StateDictType):
        names |= {m.lstrip("_") for m in enum.__members__}
    return sorted(names)


@contextlib.contextmanager
def _isolated_environ() -> Iterator[None]:
    """Run with the FSDP variables cleared, and restore the environment afterwards."""
    saved = dict(os.environ)
    for name in list(os.environ):
        if name.startswith(("FSDP_", "ACCELERATE_")):
            del os.environ[name]
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _pretend_gpu() -> Iterator[None]:
    """``sync_module_states`` makes the plugin ask for the current GPU; answer device 0, so
    that a CPU machine probes the same code path as a GPU one."""
    import torch
    from accelerate.utils import dataclasses as acc_dataclasses

    saved = (acc_dataclasses.is_cuda_available, torch.cuda.current_device)
    acc_dataclasses.is_cuda_available = lambda: True
    torch.cuda.current_device = lambda: 0
    try:
        yield
    finally:
        acc_dataclasses.is_cuda_available, torch.cuda.current_device = saved


def plugin_outcome(plugin_factory) -> tuple[str, str]:
    """``("ok", fields)`` for the plugin the factory builds, or ``("error", exception type)``."""
    try:
        with _isolated_environ(), _pretend_gpu():
            plugin = plugin_factory()
    except (ValueError, KeyError, TypeError, RuntimeError) as exc:
        return "error", type(exc).__name__
    if plugin is None:
        return "ok", "(no plugin)"
    fields = []
    for field in dataclasses.fields(plugin):
        if field.name == "param_init_fn":
            continue
        value = getattr(plugin, field.name)
        fields.append(f"{field.name}={getattr(value, '__name__', None) or repr(value)}")
    return "ok", "; ".join(fields)


def launch_env(fsdp_config: dict, top_level: dict | None = None) -> tuple[dict, object]:
    """What ``accelerate launch --config_file`` exports for this ``fsdp_config`` (and top
    level), and its parsed arguments; no process is started."""
    import yaml
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    config = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "FSDP",
        "mixed_precision": "no",
        "num_machines": 1,
        "num_processes": 2,
        "machine_rank": 0,
        **(top_level or {}),
        "fsdp_config": fsdp_config,
    }
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        args = launch_command_parser().parse_args(["--config_file", str(path), "train.py"])
        args, _, _ = _validate_launch_command(args)
        return prepare_multi_gpu_env(args), args


def launch_plugin(fsdp_config: dict, top_level: dict | None = None):
    """The plugin a script gets when ``accelerate launch`` reads this ``fsdp_config``."""
    from accelerate.utils import FullyShardedDataParallelPlugin

    env, _ = launch_env(fsdp_config, top_level)
    os.environ.update({k: v for k, v in env.items() if k.startswith("FSDP_")})
    return FullyShardedDataParallelPlugin()


def accelerate_outcome(config: dict, top_level: dict | None = None) -> tuple[str, str]:
    """``plugin_outcome`` of ``accelerate launch`` with this ``fsdp_config`` (and top level)."""
    return plugin_outcome(lambda: launch_plugin(config, top_level))


def accelerate_effects() -> dict[str, dict[int, str]]:
    """Key -> {FSDP version: honoured | ignored | rejected} when it comes from a config file."""
    effects = {}
    for key, (values, needs) in ACCELERATE_PROBES.items():
        effects[key] = {}
        for version in (1, 2):
            base = {"fsdp_version": version, **BASE_FSDP_CONFIG, **needs}
            without = accelerate_outcome(base)
            if without[0] != "ok":
                raise LookupError(f"probe base for {key} (FSDP{version}) fails: {without[1]}")
            probed = accelerate_outcome({**base, key: values[version]})
            if probed[0] != "ok":
                effects[key][version] = REJECTED
            else:
                effects[key][version] = IGNORED if probed == without else HONOURED
    return effects


def _alternatives(key: str, value: object, accepted: dict[str, dict[int, list[str]]], version: int):
    """The other values a needed key may take: the other accepted names, or the other bool."""
    if isinstance(value, bool):
        return [not value]
    names = accepted.get(key, {}).get(version, [])
    return [n for n in names if not n.isdigit() and n not in ("true", "false") and n != value]


def accelerate_needs(
    effects: dict[str, dict[int, str]], accepted: dict[str, dict[int, list[str]]]
) -> dict[str, dict]:
    """Key -> {"needs": "other_key=value", "otherwise": ignored | rejected} for the keys that
    matter only with another key's value, found by giving that key each other value."""
    found = {}
    for key, (values, needs) in ACCELERATE_PROBES.items():
        if len(needs) != 1:
            continue
        ((other, wanted),) = needs.items()
        version = 2 if effects[key][2] == HONOURED else 1
        outcomes = set()
        for alternative in _alternatives(other, wanted, accepted, version):
            base = {"fsdp_version": version, **BASE_FSDP_CONFIG, other: alternative}
            without = accelerate_outcome(base)
            probed = accelerate_outcome({**base, key: values[version]})
            if without[0] != "ok":
                continue  # the alternative itself is refused: says nothing about the key
            outcomes.add(
                REJECTED if probed[0] != "ok" else IGNORED if probed == without else HONOURED
            )
        if outcomes in ({IGNORED}, {REJECTED}):
            wanted_text = str(wanted).lower() if isinstance(wanted, bool) else wanted
            found[key] = {"needs": f"{other}={wanted_text}", "otherwise": outcomes.pop()}
    return found


def accelerate_accepted(effects: dict[str, dict[int, str]]) -> dict[str, dict[int, list[str]]]:
    """Key -> {version: the names the plugin accepts} for the named-value keys, in the versions
    that honour them (an ignored key accepts anything)."""
    names = candidate_names()
    accepted: dict[str, dict[int, list[str]]] = {}
    for key in NAMED_VALUE_KEYS:
        _, needs = ACCELERATE_PROBES[key]
        accepted[key] = {}
        for version in (1, 2):
            if effects[key][version] != HONOURED:
                accepted[key][version] = []
                continue
            base = {"fsdp_version": version, **BASE_FSDP_CONFIG, **needs}
            accepted[key][version] = [
                str(name).lower() if isinstance(name, bool) else str(name)
                for name in [*names, *range(6), False, True]
                if accelerate_outcome({**base, key: name})[0] == "ok"
            ]
    return accepted


def accelerate_case_insensitive(accepted: dict[str, dict[int, list[str]]]) -> list[str]:
    """The named-value keys whose names the plugin also takes in lower case."""
    found = []
    for key, per_version in accepted.items():
        version, names = next(((v, n) for v, n in per_version.items() if n), (None, []))
        names = [n for n in names if not n.isdigit() and n not in ("true", "false")]
        if not names:
            continue
        base = {"fsdp_version": version, **BASE_FSDP_CONFIG, **ACCELERATE_PROBES[key][1]}
        if all(accelerate_outcome({**base, key: n.lower()})[0] == "ok" for n in names):
            found.append(key)
    return sorted(found)


def bool_words() -> list[str]:
    """The strings accelerate's ``str_to_bool`` takes for a boolean key."""
    from accelerate.utils.environment import str_to_bool

    words = []
    for word in BOOL_CANDIDATES:
        try:
            str_to_bool(word)
        except ValueError:
            continue
        words.append(word)
    return words


def trainer_outcome(fsdp_config: dict, fsdp: object = True) -> tuple[str, str]:
    """``plugin_outcome`` of the plugin the Trainer builds from this ``fsdp_config``."""
    import warnings

    from accelerate.utils import FullyShardedDataParallelPlugin
    from transformers import TrainingArguments

    def build():
        with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            args = TrainingArguments(output_dir=folder, fsdp=fsdp, fsdp_config=dict(fsdp_config))
            if args.fsdp_plugin_args is None:  # the XLA path: no accelerate plugin at all
                return None
            return FullyShardedDataParallelPlugin(**args.fsdp_plugin_args)

    return plugin_outcome(build)


def trainer_accepted() -> dict[str, dict[int, list[str]]]:
    """Key -> {version: accepted names} for ``TrainingArguments(fsdp_config=...)``, through
    the plugin it builds (so a name the Trainer passes on but the plugin refuses is refused)."""
    names = candidate_names()
    names += [n.lower() for n in names]
    accepted: dict[str, dict[int, list[str]]] = {}
    for key in TRAINER_NAMED_VALUE_KEYS:
        accepted[key] = {}
        for version in (1, 2):
            base = {"version": version, "sync_module_states": False}
            found = [n for n in names if trainer_outcome({**base, key: n})[0] == "ok"]
            accepted[key][version] = found
    return accepted


def trainer_fsdp_options() -> dict[int, list[str]]:
    """The words ``TrainingArguments(fsdp="...")`` accepts, per ``fsdp_config["version"]``."""
    from transformers.trainer_utils import FSDPOption

    options = {}
    for version in (1, 2):
        base = {"version": version, "sync_module_states": False}
        options[version] = [
            o.value for o in FSDPOption if trainer_outcome(base, fsdp=o.value)[0] == "ok"
        ]
    return options


def trainer_needs(accepted: dict[str, dict[int, list[str]]]) -> dict[str, dict]:
    """As ``accelerate_needs``, for ``TrainingArguments(fsdp_config=...)`` (FSDP2)."""
    found = {}
    for key, (value, needs) in TRAINER_PROBES.items():
        ((other, wanted),) = needs.items()
        base = {"version": 2}
        outcomes = set()
        for alternative in accepted[other][2]:
            if alternative == wanted or not alternative.isupper():
                continue
            without = trainer_outcome({**base, other: alternative})
            probed = trainer_outcome({**base, other: alternative, key: value})
            if without[0] == "ok":
                outcomes.add(
                    REJECTED if probed[0] != "ok" else IGNORED if probed == without else HONOURED
                )
        if outcomes in ({IGNORED}, {REJECTED}):
            found[key] = {"needs": f"{other}={wanted}", "otherwise": outcomes.pop()}
    return found


def trainer_exports_offload() -> bool:
    """Whether ``TrainingArguments(fsdp_config={"cpu_offload": True})`` tells accelerate about
    the offload (``FSDP_OFFLOAD_PARAMS``, which makes it add a CPU backend to the process
    group) - else the group is the device backend alone."""
    import warnings

    from transformers import TrainingArguments

    with _isolated_environ(), tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        TrainingArguments(output_dir=folder, fsdp=True, fsdp_config={"cpu_offload": True})
        return os.environ.get("FSDP_OFFLOAD_PARAMS", "").lower() == "true"
