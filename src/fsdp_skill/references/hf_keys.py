"""Mine the Hugging Face FSDP configuration keys from the installed accelerate and transformers.

Three tables come out, each row with the file and line it was read from:

- ``plugin``: the fields of accelerate's ``FullyShardedDataParallelPlugin``, the environment
  variable each falls back to, and what it becomes in torch (the ``FullyShardedDataParallel``
  argument for FSDP1, the ``fully_shard`` argument for FSDP2, or what accelerate does with it),
  and whether FSDP2 drops or requires it;
- ``accelerate_config``: the keys of ``fsdp_config:`` in an ``accelerate launch`` config file
  (the launcher's ``--fsdp_*`` options), their launch defaults, the variable the launcher
  exports for each, and the plugin field that reads it;
- ``trainer_fsdp_config``: the keys of ``TrainingArguments(fsdp_config=...)``, the plugin
  argument each sets, its default and the FSDP version it applies to.

The source is read with ``ast`` (and the launcher's own argument parser), so a new release
that adds, renames or re-routes a key gives a different table: the knowledge test that
re-mines and compares with ``knowledge/hf_fsdp_keys.toml`` then fails. Importing this module is
cheap; accelerate and transformers are imported inside ``mine()``.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import textwrap
from pathlib import Path

from fsdp_skill import atomic
from fsdp_skill.knowledge import KNOWLEDGE_DIR

DATA_FILE = KNOWLEDGE_DIR / "hf_fsdp_keys.toml"

# What accelerate does with the plugin fields that it does not pass to a torch constructor.
# Written by hand from the functions named; `mine()` fails when a field appears here that the
# plugin lacks, or when a field is neither here nor passed to torch (a new release's field).
ACCELERATE_OWN_USE = {
    "fsdp_version": (
        "FullyShardedDataParallel (FSDP1)",
        "fully_shard (FSDP2)",
        "accelerate/accelerator.py prepare_model / fsdp2_prepare_model",
    ),
    "auto_wrap_policy": (
        "FullyShardedDataParallel(auto_wrap_policy=...)",
        "the modules the policy matches get their own fully_shard, bottom-up, then the root",
        "accelerate/utils/fsdp_utils.py fsdp2_prepare_auto_wrap_policy",
    ),
    "transformer_cls_names_to_wrap": (
        "transformer_auto_wrap_policy(transformer_layer_cls=...)",
        "the classes that get their own fully_shard (default: the model's _no_split_modules)",
        "accelerate/utils/dataclasses.py set_auto_wrap_policy",
    ),
    "min_num_params": (
        "size_based_auto_wrap_policy(min_num_params=...)",
        "modules with more parameters get their own fully_shard",
        "accelerate/utils/fsdp_utils.py fsdp2_prepare_auto_wrap_policy",
    ),
    "activation_checkpointing": (
        "apply_activation_checkpointing(checkpoint_wrapper, CheckpointImpl.NO_REENTRANT) after wrapping",
        "checkpoint_wrapper on each wrapped layer, before fully_shard",
        "accelerate/accelerator.py prepare_model / fsdp_utils.py fsdp2_apply_ac",
    ),
    "activation_checkpointing_offload": (
        "(raises: needs fsdp_version 2)",
        "offload_wrapper around each checkpoint_wrapper",
        "accelerate/utils/fsdp_utils.py fsdp2_apply_ac",
    ),
    "cpu_ram_efficient_loading": (
        "rank 0 loads the weights, sync_module_states broadcasts them",
        "model moved to meta, sharded, then set_model_state_dict(full_state_dict=True, broadcast_from_rank0=True)",
        "accelerate/utils/fsdp_utils.py fsdp2_prepare_model / fsdp2_load_full_state_dict",
    ),
    "state_dict_type": (
        "FSDP.state_dict_type(model, StateDictType...) when saving",
        "get_model_state_dict(StateDictOptions(full_state_dict=...)) when saving",
        "accelerate/utils/fsdp_utils.py save_fsdp_model",
    ),
    "state_dict_config": (
        "FSDP.state_dict_type(..., state_dict_config)",
        "(unused: StateDictOptions instead)",
        "accelerate/utils/fsdp_utils.py save_fsdp_model",
    ),
    "optim_state_dict_config": (
        "FSDP.state_dict_type(..., optim_state_dict_config)",
        "(unused: StateDictOptions instead)",
        "accelerate/utils/fsdp_utils.py save_fsdp_optimizer",
    ),
}


def _source(module_name: str) -> tuple[ast.Module, str, str]:
    """The parsed source of ``module_name``, its text and its path relative to site-packages."""
    module = importlib.import_module(module_name)
    path = Path(inspect.getsourcefile(module))
    text = path.read_text(encoding="utf-8")
    rel = "/".join(path.parts[-(module_name.count(".") + 1) :])
    return ast.parse(text), text, rel


def _find(tree: ast.AST, kind: type, name: str) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, kind) and getattr(node, "name", None) == name:
            return node
    raise LookupError(f"{name} not found")


def _environ_get(node: ast.AST) -> tuple[str, str] | None:
    """``(variable, default)`` if ``node`` holds ``os.environ.get(prefix + "X", default)``."""
    for call in ast.walk(node):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
            continue
        if call.func.attr != "get" or ast.unparse(call.func.value) != "os.environ":
            continue
        name = call.args[0]
        if isinstance(name, ast.BinOp) and isinstance(name.right, ast.Constant):
            variable = "FSDP_" + name.right.value  # env_prefix + "X"
        elif isinstance(name, ast.Constant):
            variable = name.value
        else:
            continue
        default = _literal(call.args[1]) if len(call.args) > 1 else ""
        return variable, default
    return None


def _literal(node: ast.AST) -> str:
    """A default as written: the value of a literal or of ``CONSTANT[i]`` from accelerate's
    constants, else the expression's source text."""
    try:
        return str(ast.literal_eval(node))
    except ValueError:
        pass
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and isinstance(node.slice, ast.Constant)
    ):
        constants = importlib.import_module("accelerate.utils.constants")
        table = getattr(constants, node.value.id, None)
        if isinstance(table, list):
            return str(table[node.slice.value])
    return ast.unparse(node)


def _type_name(annotation: object) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    text = str(annotation).replace("typing.", "").replace("collections.abc.", "")
    return re.sub(r"ForwardRef\('([^']*)'\)", r"\1", text).replace("NoneType", "None")


def _self_attrs(node: ast.AST, owner: str = "self") -> set[str]:
    return {
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == owner
    }


def _plugin_env(rel: str, cls: ast.ClassDef) -> dict[str, dict]:
    """Plugin field -> the variable it falls back to, that variable's default, the line."""
    found: dict[str, dict] = {}
    for method in ("__post_init__", "set_state_dict_type"):
        func = _find(cls, ast.FunctionDef, method)
        local: dict[str, tuple[str, str, int]] = {}
        for node in ast.walk(func):
            if not isinstance(node, ast.Assign) or len(node.targets) != 1:
                continue
            target = node.targets[0]
            env = _environ_get(node.value)
            if isinstance(target, ast.Name) and env:
                local[target.id] = (*env, node.lineno)
            elif isinstance(target, ast.Attribute) and ast.unparse(target.value) == "self":
                if env is None:
                    names = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
                    hits = [local[n] for n in names if n in local]
                    if not hits:
                        continue
                    variable, default, line = hits[0]
                else:
                    (variable, default), line = env, node.lineno
                found.setdefault(
                    target.attr,
                    {"env": variable, "env_default": default, "source": f"{rel}:{line}"},
                )
    return found


def _fsdp2_rules(cls: ast.ClassDef) -> dict[str, str]:
    """Plugin fields that FSDP2 drops ("fsdp1") or that need FSDP2 ("fsdp2"), from the checks
    in ``__post_init__`` that test ``self.fsdp_version`` together with the field."""
    rules: dict[str, str] = {}
    for node in ast.walk(_find(cls, ast.FunctionDef, "__post_init__")):
        if not isinstance(node, ast.If) or not isinstance(node.test, ast.BoolOp):
            continue
        if any(isinstance(n, ast.Call) for n in ast.walk(node.test)):
            continue  # a type check or a torch-version condition, not a rule about FSDP2
        test = ast.unparse(node.test)
        fields = _self_attrs(node.test) - {"fsdp_version"}
        body = [ast.unparse(stmt) for stmt in node.body]
        raises = any(stmt.startswith("raise") for stmt in body)
        if "self.fsdp_version == 2" in test:
            for field in fields:
                if raises or f"self.{field} = None" in body:
                    rules[field] = "fsdp1"
        elif "self.fsdp_version != 2" in test and raises:
            for field in fields:
                rules[field] = "fsdp2"
    return rules


def _kwargs_dict(func: ast.FunctionDef, variable: str, owner: str) -> dict[str, list[str]]:
    """Torch argument -> plugin fields, from ``variable = {...}`` / ``variable[k] = ...`` in
    ``func`` whose values read ``owner.<field>``."""
    mapping: dict[str, list[str]] = {}
    for node in ast.walk(func):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        if (
            isinstance(target, ast.Name)
            and target.id == variable
            and isinstance(node.value, ast.Dict)
        ):
            pairs = zip(node.value.keys, node.value.values, strict=True)
        elif (
            isinstance(target, ast.Subscript)
            and ast.unparse(target.value) == variable
            and isinstance(target.slice, ast.Constant)
        ):
            pairs = [(target.slice, node.value)]
        else:
            continue
        for key, value in pairs:
            fields = sorted(_self_attrs(value, owner))
            if isinstance(key, ast.Constant) and fields:
                mapping.setdefault(key.value, fields)
    return mapping


def _torch_side(fsdp1: dict[str, list[str]], fsdp2: dict[str, list[str]], field: str) -> tuple:
    one = [arg for arg, fields in fsdp1.items() if field in fields]
    two = [arg for arg, fields in fsdp2.items() if field in fields]
    return (
        ", ".join(f"FullyShardedDataParallel({arg}=...)" for arg in one),
        ", ".join(f"fully_shard({arg}=...)" for arg in two),
    )


def mine_plugin() -> list[dict]:
    """One row per ``FullyShardedDataParallelPlugin`` field."""
    from accelerate.utils import FullyShardedDataParallelPlugin

    tree, _, rel = _source("accelerate.utils.dataclasses")
    cls = _find(tree, ast.ClassDef, "FullyShardedDataParallelPlugin")
    env = _plugin_env(rel, cls)
    rules = _fsdp2_rules(cls)
    acc_tree, _, acc_rel = _source("accelerate.accelerator")
    fsdp1 = _kwargs_dict(_find(acc_tree, ast.FunctionDef, "prepare_model"), "kwargs", "fsdp_plugin")
    utils_tree, _, utils_rel = _source("accelerate.utils.fsdp_utils")
    fsdp2 = _kwargs_dict(
        _find(utils_tree, ast.FunctionDef, "fsdp2_prepare_model"), "fsdp2_kwargs", "fsdp2_plugin"
    )
    lines = {n.target.id: n.lineno for n in cls.body if isinstance(n, ast.AnnAssign)}
    rows = []
    passed = {f for fields in [*fsdp1.values(), *fsdp2.values()] for f in fields}
    unknown = set(ACCELERATE_OWN_USE) - {
        f.name for f in dataclasses.fields(FullyShardedDataParallelPlugin)
    }
    if unknown:
        raise LookupError(f"ACCELERATE_OWN_USE names fields the plugin lacks: {sorted(unknown)}")
    for field in dataclasses.fields(FullyShardedDataParallelPlugin):
        one, two = _torch_side(fsdp1, fsdp2, field.name)
        where = f"{acc_rel} prepare_model; {utils_rel} fsdp2_prepare_model"
        if field.name in ACCELERATE_OWN_USE:
            own_one, own_two, where = ACCELERATE_OWN_USE[field.name]
            one, two = one or own_one, two or own_two
        elif field.name not in passed:
            raise LookupError(f"plugin field {field.name} is new: say what accelerate does with it")
        only = rules.get(field.name, "")
        if only == "fsdp1":
            two = "(dropped: FSDP1 only)"
        elif only == "fsdp2":
            one = "(raises: FSDP2 only)"
        one, two = (
            one or "(not passed to FullyShardedDataParallel)",
            two or "(not passed to fully_shard)",
        )
        rows.append(
            {
                "field": field.name,
                "type": _type_name(field.type),
                "env": env.get(field.name, {}).get("env", ""),
                "env_default": env.get(field.name, {}).get("env_default", ""),
                "only": only,
                "fsdp1": one,
                "fsdp2": two,
                "torch_source": where,
                "source": f"{rel}:{lines[field.name]}",
            }
        )
    return rows


def _launcher_env(tree: ast.Module, rel: str) -> dict[str, tuple[str, str]]:
    """Launcher option (``fsdp_x``) -> the variable ``prepare_multi_gpu_env`` exports for it."""
    found = {}
    for node in ast.walk(_find(tree, ast.FunctionDef, "prepare_multi_gpu_env")):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        if not (isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant)):
            continue
        for option in _self_attrs(node.value, "args"):
            if option.startswith("fsdp_"):
                found.setdefault(option, (target.slice.value, f"{rel}:{node.lineno}"))
    return found


def _asked_by_config(tree: ast.Module) -> dict[str, str]:
    """Key -> the FSDP versions ``accelerate config`` asks it for ("1", "2" or "1,2")."""
    asked: dict[str, set[str]] = {}

    def visit(stmts: list[ast.stmt], versions: set[str]) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.If):
                test = ast.unparse(stmt.test)
                if test == "fsdp_version == 1":
                    visit(stmt.body, versions & {"1"})
                    visit(stmt.orelse, versions - {"1"})
                    continue
                visit(stmt.body, versions)
                visit(stmt.orelse, versions)
            elif isinstance(stmt, ast.Assign):
                target = stmt.targets[0]
                if (
                    isinstance(target, ast.Subscript)
                    and ast.unparse(target.value) == "fsdp_config"
                    and isinstance(target.slice, ast.Constant)
                ):
                    asked.setdefault(target.slice.value, set()).update(versions)
            elif hasattr(stmt, "body"):
                visit(stmt.body, versions)
                visit(getattr(stmt, "orelse", []), versions)

    visit(_find(tree, ast.FunctionDef, "get_cluster_input").body, {"1", "2"})
    return {key: ",".join(sorted(v)) for key, v in asked.items()}


def mine_accelerate_config(plugin: list[dict]) -> list[dict]:
    """One row per ``--fsdp_*`` option of ``accelerate launch`` (= a key of ``fsdp_config:``)."""
    from accelerate.commands.launch import launch_command_parser

    parser = launch_command_parser()
    group = next(g for g in parser._action_groups if g.title == "FSDP Arguments")
    _, launch_text, launch_rel = _source("accelerate.commands.launch")
    utils_tree, _, utils_rel = _source("accelerate.utils.launch")
    exported = _launcher_env(utils_tree, utils_rel)
    cluster_tree, _, _ = _source("accelerate.commands.config.cluster")
    asked = _asked_by_config(cluster_tree)
    field_of_env = {row["env"]: row["field"] for row in plugin if row["env"]}
    only_of_field = {row["field"]: row["only"] for row in plugin}
    rows = []
    for action in group._group_actions:
        key = action.dest
        default = action.default
        if isinstance(default, str) and default.lower() in ("true", "false"):
            kind = "bool"
        elif action.choices and all(str(c).isdigit() for c in action.choices):
            kind = "int"
        elif action.type is int:
            kind = "int"
        else:
            kind = "str"
        env, env_source = exported.get(key, ("", ""))
        line = launch_text[: launch_text.index(f'"--{key}"')].count("\n") + 1
        rows.append(
            {
                "key": key,
                "type": kind,
                "launch_default": "" if default is None else str(default),
                "choices": [str(c) for c in action.choices or ()],
                "env": env,
                "field": field_of_env.get(env, ""),
                "only": only_of_field.get(field_of_env.get(env, ""), ""),
                "asked_by_config": asked.get(key, ""),
                "source": f"{launch_rel}:{line}",
                "env_source": env_source,
            }
        )
    # Keys the launcher exports without offering an option for them (read from the file only).
    for key, (env, env_source) in sorted(exported.items()):
        if all(row["key"] != key for row in rows):
            rows.append(
                {
                    "key": key,
                    "type": "str",
                    "launch_default": "",
                    "choices": [],
                    "env": env,
                    "field": field_of_env.get(env, ""),
                    "only": only_of_field.get(field_of_env.get(env, ""), ""),
                    "asked_by_config": asked.get(key, ""),
                    "source": env_source,
                    "env_source": env_source,
                }
            )
    return rows


def mine_trainer_fsdp_config() -> list[dict]:
    """One row per key ``TrainingArguments._process_fsdp_args`` reads from ``fsdp_config``."""
    from transformers import TrainingArguments

    tree, _, rel = _source("transformers.training_args")
    func = _find(tree, ast.FunctionDef, "_process_fsdp_args")
    documented = _documented_trainer_keys(TrainingArguments.__doc__ or "")
    rows: dict[str, dict] = {}

    def keys_in(node: ast.AST, local: dict[str, list[tuple[str, str]]]) -> list[tuple[str, str]]:
        found = []
        for n in ast.walk(node):
            if isinstance(n, ast.Call) and ast.unparse(n.func) in (
                "self.fsdp_config.get",
                "self.fsdp_config.setdefault",
            ):
                default = _literal(n.args[1]) if len(n.args) > 1 else ""
                found.append((n.args[0].value, default))
            elif isinstance(n, ast.Subscript) and ast.unparse(n.value) == "self.fsdp_config":
                if isinstance(n.slice, ast.Constant):
                    found.append((n.slice.value, ""))
            elif isinstance(n, ast.Compare) and isinstance(n.ops[0], ast.In):
                if ast.unparse(n.comparators[0]) == "self.fsdp_config":
                    found.append((n.left.value, ""))
            elif isinstance(n, ast.Name) and n.id in local:
                found.extend(local[n.id])
        return found

    def note(key: str, default: str, field: str, only: str, line: int) -> None:
        row = rows.setdefault(
            key,
            {
                "key": key,
                "field": "",
                "default": "",
                "only": only,
                "documented": key in documented,
                "doc_type": documented.get(key, ""),
                "source": f"{rel}:{line}",
            },
        )
        if default and not row["default"]:
            row["default"] = default
        if field and not row["field"]:
            row["field"], row["only"], row["source"] = field, only, f"{rel}:{line}"
        elif field and row["only"] != only:
            row["only"] = (
                ""  # read for both versions (e.g. with a bool for one, a name for the other)
            )

    def visit(stmts: list[ast.stmt], only: str, test_keys: list, local: dict) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.If):
                test = ast.unparse(stmt.test)
                if test == "fsdp_version == 2":
                    visit(stmt.body, "fsdp2", [], local)
                    visit(stmt.orelse, "fsdp1", [], local)
                    continue
                here = keys_in(stmt.test, local)
                for key, default in here:
                    note(key, default, "", only, stmt.lineno)
                visit(stmt.body, only, here, local)
                visit(stmt.orelse, only, [], local)
                continue
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                keys = keys_in(stmt.value, local)
                if isinstance(target, ast.Name):
                    if keys:
                        local[target.id] = keys
                    if target.id == "fsdp_plugin_args" and isinstance(stmt.value, ast.Dict):
                        for k, v in zip(stmt.value.keys, stmt.value.values, strict=True):
                            for key, default in keys_in(v, local):
                                note(key, default, k.value, only, stmt.lineno)
                    continue
                if (
                    isinstance(target, ast.Subscript)
                    and ast.unparse(target.value) == "fsdp_plugin_args"
                    and isinstance(target.slice, ast.Constant)
                ):
                    for key, default in keys or test_keys:
                        note(key, default, target.slice.value, only, stmt.lineno)
                    continue
            for key, default in keys_in(stmt, local):  # read, but sets no plugin argument
                note(key, default, "", only, stmt.lineno)

    visit(func.body, "", [], {})
    for key in documented:
        rows.setdefault(
            key,
            {
                "key": key,
                "field": "",
                "default": "",
                "only": "",
                "documented": True,
                "doc_type": documented[key],
                "source": f"{rel} TrainingArguments docstring",
            },
        )
    return [rows[k] for k in sorted(rows)]


def _documented_trainer_keys(doc: str) -> dict[str, str]:
    """Key -> type, from the ``fsdp_config`` entry's "Supported keys" list in the docstring."""
    text = textwrap.dedent(doc)
    start = text.find("fsdp_config (")
    block = text[start : text.find("deepspeed (", start)]
    found = {}
    for line in block.splitlines():
        stripped = line.strip()
        if stripped.startswith("- ") and " (`" in stripped:
            name, rest = stripped[2:].split(" (`", 1)
            found[name.strip()] = rest.split("`", 1)[0]
    return found


def mine_accelerate_file() -> dict:
    """The top-level keys an accelerate config file may have (any other makes the launcher
    refuse the file), and the legacy keys it converts instead of refusing."""
    from accelerate.commands.config.config_args import ClusterConfig

    tree, _, rel = _source("accelerate.commands.config.config_args")
    process = _find(tree, ast.FunctionDef, "process_config")
    fields = sorted(f.name for f in dataclasses.fields(ClusterConfig))
    converted = {
        node.left.value
        for node in ast.walk(process)
        if isinstance(node, ast.Compare)
        and isinstance(node.ops[0], ast.In)
        and isinstance(node.left, ast.Constant)
        and ast.unparse(node.comparators[0]) == "config_dict"
    }
    return {
        "top_level_keys": fields,
        "legacy_top_level_keys": sorted(converted - set(fields)),
        "source": f"{rel} ClusterConfig, BaseConfig.process_config",
    }


def mine_trainer_save_model() -> dict:
    """The state-dict types for which ``Trainer.save_model`` writes the model under FSDP: the
    ``"X" in str(...state_dict_type)`` tests that guard its ``_save`` call."""
    tree, _, rel = _source("transformers.trainer")
    func = _find(tree, ast.FunctionDef, "save_model")
    for node in ast.walk(func):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "self.is_fsdp_enabled":
            writes = []
            for inner in ast.walk(node):
                if (
                    isinstance(inner, ast.If)
                    and isinstance(inner.test, ast.Compare)
                    and isinstance(inner.test.left, ast.Constant)
                    and "state_dict_type" in ast.unparse(inner.test.comparators[0])
                    and any("_save(" in ast.unparse(stmt) for stmt in inner.body)
                ):
                    writes.append(inner.test.left.value)
                    if inner.orelse:
                        writes.append("(any other: the else branch)")
            return {"writes_with": sorted(writes), "source": f"{rel}:{node.lineno}"}
    raise LookupError("Trainer.save_model has no `self.is_fsdp_enabled` branch")


def mine_trainer_arguments() -> dict:
    """The fields of ``TrainingArguments`` (the keys of a Trainer arguments file)."""
    from transformers import TrainingArguments

    _, _, rel = _source("transformers.training_args")
    return {
        "fields": sorted(f.name for f in dataclasses.fields(TrainingArguments)),
        "source": f"{rel} TrainingArguments",
    }


def _add_probed(accelerate_rows: list[dict], trainer_rows: list[dict]) -> dict:
    """Add what the probes found to the rows; return the tables the probes give on their own."""
    from fsdp_skill.references import hf_probe

    effects = hf_probe.accelerate_effects()
    accepted = hf_probe.accelerate_accepted(effects)
    needs = hf_probe.accelerate_needs(effects, accepted)
    for row in accelerate_rows:
        per_key = effects.get(row["key"], {})
        row["effect_v1"] = per_key.get(1, "")
        row["effect_v2"] = per_key.get(2, "")
        row["accepted_v1"] = accepted.get(row["key"], {}).get(1, [])
        row["accepted_v2"] = accepted.get(row["key"], {}).get(2, [])
        row["needs"] = needs.get(row["key"], {}).get("needs", "")
        row["without_needs"] = needs.get(row["key"], {}).get("otherwise", "")
    trainer_accepted = hf_probe.trainer_accepted()
    trainer_needs = hf_probe.trainer_needs(trainer_accepted)
    for row in trainer_rows:
        row["accepted_v1"] = trainer_accepted.get(row["key"], {}).get(1, [])
        row["accepted_v2"] = trainer_accepted.get(row["key"], {}).get(2, [])
        row["needs"] = trainer_needs.get(row["key"], {}).get("needs", "")
        row["without_needs"] = trainer_needs.get(row["key"], {}).get("otherwise", "")
    options = hf_probe.trainer_fsdp_options()
    return {
        "accelerate_values": {
            "case_insensitive": hf_probe.accelerate_case_insensitive(accepted),
            "bool_words": hf_probe.bool_words(),
            "source": "fsdp_skill.references.hf_probe (accelerate launch + plugin, run)",
        },
        "trainer_fsdp_option": {
            "words_v1": options[1],
            "words_v2": options[2],
            "exports_offload_to_accelerate": hf_probe.trainer_exports_offload(),
            "source": "fsdp_skill.references.hf_probe (TrainingArguments(fsdp=...), run)",
        },
    }


def mine() -> dict:
    """Everything, with the versions it was mined from."""
    import accelerate
    import transformers

    plugin = mine_plugin()
    accelerate_rows = mine_accelerate_config(plugin)
    trainer_rows = mine_trainer_fsdp_config()
    probed = _add_probed(accelerate_rows, trainer_rows)
    return {
        "versions": {
            "accelerate": accelerate.__version__,
            "transformers": transformers.__version__,
        },
        "accelerate_file": mine_accelerate_file(),
        **probed,
        "trainer_save_model": mine_trainer_save_model(),
        "trainer_arguments": mine_trainer_arguments(),
        "plugin": plugin,
        "accelerate_config": accelerate_rows,
        "trainer_fsdp_config": trainer_rows,
    }


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


HEADER = """\
# Hugging Face FSDP configuration keys, mined from the installed packages by
# scripts/mine_hf_keys.py (fsdp_skill.references.hf_keys). Do not edit by hand: rerun the
# script; tests/knowledge/test_hf_keys.py fails when this file and the installed packages
# disagree.
#
# [[plugin]]: accelerate's FullyShardedDataParallelPlugin fields. env: the variable the field
#   falls back to (what `accelerate launch` exports); only: "fsdp1" = dropped or rejected
#   with fsdp_version 2, "fsdp2" = needs it; fsdp1 / fsdp2: what the field becomes in torch.
# [[accelerate_config]]: keys of `fsdp_config:` in an accelerate config file (= the
#   `accelerate launch --fsdp_*` options). launch_default: used when the file omits the key;
#   asked_by_config: FSDP versions for which `accelerate config` writes the key.
#   effect_v1 / effect_v2: what the launcher and the plugin do with the key under that
#   fsdp_version, found by running them (honoured, ignored or rejected); accepted_v1 / _v2:
#   the names the plugin takes for a named value (empty: any value, or not honoured).
# [[trainer_fsdp_config]]: keys of TrainingArguments(fsdp_config=...); field: the plugin
#   argument it sets; only: the fsdp_config["version"] it applies to; accepted_v1 / _v2 as
#   above, through TrainingArguments and the plugin it builds.
# [accelerate_file]: the top-level keys of an accelerate config file (others are refused).
# [trainer_save_model]: the state-dict types for which Trainer.save_model writes the model
#   under FSDP. needs / without_needs (both tables): the key matters only with that other
#   key's value; without it the key is ignored or the launch is rejected.
"""


def render(data: dict) -> str:
    """The data file's text for ``mine()``'s result (deterministic)."""
    out = [HEADER.rstrip("\n")]
    for name, value in data.items():
        rows = value if isinstance(value, list) else [value]
        for row in rows:
            out += ["", f"[[{name}]]" if isinstance(value, list) else f"[{name}]"]
            out += [f"{k} = {_toml_value(v)}" for k, v in row.items()]
    return "\n".join(out) + "\n"


def write(path: Path = DATA_FILE) -> Path:
    """Mine and write the data file atomically; return its path."""
    atomic.write_text(path, render(mine()))
    return path
