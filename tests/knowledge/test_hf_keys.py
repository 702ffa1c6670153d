"""The mined Hugging Face FSDP keys (knowledge/hf_fsdp_keys.toml) are true for the installed
accelerate and transformers, and the guides' tables say what the data file says.

Re-mining gives the same file (a new release shows up here); the torch arguments exist in
torch's signatures; the launcher, the plugin and ``TrainingArguments`` behave as the rows say
when fed a value; and every row of the guides' mapping tables agrees with its data row.
"""

from __future__ import annotations

import difflib
import inspect
import re

import pytest

from fsdp_skill import knowledge
from fsdp_skill.references import hf_keys

pytest.importorskip("accelerate")
pytest.importorskip("transformers")

DATA = knowledge.hf_fsdp_keys()
PLUGIN = {row["field"]: row for row in DATA["plugin"]}
CONFIG = {row["key"]: row for row in DATA["accelerate_config"]}
TRAINER = {row["key"]: row for row in DATA["trainer_fsdp_config"]}
GUIDES = {g.id: g for g in knowledge.guides()}


def test_data_file_matches_the_installed_packages():
    fresh = hf_keys.render(hf_keys.mine())
    stored = hf_keys.DATA_FILE.read_text(encoding="utf-8")
    diff = "".join(
        difflib.unified_diff(stored.splitlines(True), fresh.splitlines(True), "stored", "mined")
    )
    assert not diff, f"hf_fsdp_keys.toml is stale: run scripts/mine_hf_keys.py\n{diff[:4000]}"


def test_torch_arguments_exist_in_torch():
    from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard

    fsdp1 = set(inspect.signature(FullyShardedDataParallel.__init__).parameters)
    fsdp2 = set(inspect.signature(fully_shard).parameters)
    for row in DATA["plugin"]:
        for arg in re.findall(r"FullyShardedDataParallel\((\w+)=", row["fsdp1"]):
            assert arg in fsdp1, f"{row['field']}: FullyShardedDataParallel has no {arg}"
        for arg in re.findall(r"fully_shard\((\w+)=", row["fsdp2"]):
            assert arg in fsdp2, f"{row['field']}: fully_shard has no {arg}"


def _launch_env(tmp_path, fsdp_config: dict) -> tuple[dict, object]:
    """What ``accelerate launch --config_file`` exports for ``fsdp_config`` (no processes)."""
    from fsdp_skill.references import hf_probe

    return hf_probe.launch_env(fsdp_config)


def test_launcher_exports_each_config_key_to_its_variable(tmp_path):
    values = {"bool": True, "int": 2, "str": "SOMETHING"}
    fsdp_config = {key: values[row["type"]] for key, row in CONFIG.items()}
    env, _ = _launch_env(tmp_path, fsdp_config)
    for key, row in CONFIG.items():
        assert row["env"], f"{key}: no variable"
        assert env[row["env"]].lower() == str(fsdp_config[key]).lower(), key


def test_launcher_keeps_a_misspelt_key_without_a_word(tmp_path):
    env, args = _launch_env(tmp_path, {"fsdp_version": 2, "fsdp_trasformer_layer_cls_to_wrap": "X"})
    assert args.fsdp_trasformer_layer_cls_to_wrap == "X"  # accepted, then read by nobody
    assert "X" not in env.values()


def test_launch_defaults_are_what_a_file_without_the_key_gets(tmp_path):
    env, _ = _launch_env(tmp_path, {"fsdp_version": 2})
    for key, row in CONFIG.items():
        if row["launch_default"] and key != "fsdp_version":
            assert env[row["env"]].lower() == row["launch_default"].lower(), key


@pytest.mark.parametrize("field", [f for f, r in PLUGIN.items() if r["env_default"] == "False"])
def test_plugin_reads_its_variable_and_fsdp2_drops_fsdp1_fields(field, monkeypatch):
    from accelerate.utils import FullyShardedDataParallelPlugin

    row = PLUGIN[field]
    monkeypatch.setenv(row["env"], "true")
    if row["only"] == "fsdp2":
        monkeypatch.setenv("FSDP_ACTIVATION_CHECKPOINTING", "true")
    try:
        plugin = FullyShardedDataParallelPlugin(fsdp_version=2)
    except ValueError:
        assert row["only"] == "fsdp1", f"{field}: rejected by FSDP2 but not marked fsdp1"
        return
    value = getattr(plugin, field)
    if row["only"] == "fsdp1":
        assert value is None, f"{field}: FSDP2 kept it"
    else:
        assert value, f"{field}: {row['env']}=true did not reach the plugin"


def _trainer_args(tmp_path, fsdp_config: dict) -> dict:
    from transformers import TrainingArguments

    args = TrainingArguments(output_dir=str(tmp_path), fsdp=True, fsdp_config=dict(fsdp_config))
    return args.fsdp_plugin_args


FLIPPABLE = [
    k for k, r in TRAINER.items() if r["field"] and r["default"].lower() in ("true", "false")
]


@pytest.mark.parametrize("key", FLIPPABLE)
def test_trainer_key_sets_its_plugin_argument_for_its_versions(key, tmp_path):
    row = TRAINER[key]
    flipped = row["default"].lower() != "true"
    for version in (1, 2):
        plugin_args = _trainer_args(tmp_path, {"version": version, key: flipped})
        if row["only"] in ("", f"fsdp{version}"):
            got = str(plugin_args.get(row["field"])).lower()
            assert got == str(flipped).lower(), f"{key} (FSDP{version}) did not set {row['field']}"
        else:
            assert row["field"] not in plugin_args, (
                f"{key} is marked {row['only']} but reaches the plugin with FSDP{version}"
            )


def test_trainer_strips_the_accelerate_prefix_and_ignores_unknown_keys(tmp_path):
    plugin_args = _trainer_args(
        tmp_path, {"fsdp_state_dict_type": "SHARDED_STATE_DICT", "no_such_key": 1}
    )
    assert plugin_args["state_dict_type"] == "SHARDED_STATE_DICT"
    assert "no_such_key" not in plugin_args


# --- the guides' tables --------------------------------------------------------------------


def _table_rows(guide_id: str, first_header: str) -> list[list[str]]:
    """The body rows of the table in ``guide_id`` whose first header cell is ``first_header``."""
    rows, inside = [], False
    for line in GUIDES[guide_id].body.splitlines():
        cells = (
            [c.strip() for c in line.strip().strip("|").split("|")]
            if line.startswith("|")
            else None
        )
        if cells is None:
            inside = False
            continue
        if cells[0] == first_header:
            inside = True
        elif inside and not set(cells[0]) <= set("-: "):
            rows.append(cells)
    return rows


def _code(cell: str) -> str:
    return cell.strip().strip("`")


@pytest.mark.parametrize("version", [1, 2])
def test_ram_efficient_loading_needs_sync_module_states_for_both_versions(version, tmp_path):
    """accelerate-fsdp: the launcher's rule does not depend on fsdp_version."""
    config = {
        "fsdp_version": version,
        "fsdp_cpu_ram_efficient_loading": True,
        "fsdp_sync_module_states": False,
    }
    with pytest.raises(ValueError, match="fsdp_cpu_ram_efficient_loading"):
        _launch_env(tmp_path, config)
    _launch_env(tmp_path, {**config, "fsdp_sync_module_states": True})  # the companion on
    text = " ".join(GUIDES["accelerate-fsdp"].body.split())
    assert "needs `fsdp_sync_module_states: true`, with FSDP2 as with FSDP1" in text
    assert "with FSDP1, `fsdp_cpu_ram_efficient_loading: true` needs" not in text


def test_accelerate_guide_table_agrees_with_the_data_file():
    rows = _table_rows("accelerate-fsdp", "config key")
    assert len(rows) >= 10
    for key_cell, field_cell, fsdp1_cell, fsdp2_cell, default_cell in rows:
        key = _code(key_cell)
        assert key in CONFIG, f"{key}: not an accelerate config key"
        row = CONFIG[key]
        assert _code(field_cell) == row["field"], key
        default = _code(default_cell)
        assert default == (row["launch_default"] or "—"), f"{key}: default {default!r}"
        plugin = PLUGIN[row["field"]]
        for arg in re.findall(r"FullyShardedDataParallel\((\w+)=", plugin["fsdp1"]):
            assert f"{arg}=" in fsdp1_cell, f"{key}: FSDP1 column should name {arg}="
        for arg in re.findall(r"fully_shard\((\w+)=", plugin["fsdp2"]):
            assert f"{arg}=" in fsdp2_cell, f"{key}: FSDP2 column should name {arg}="
        if plugin["only"] == "fsdp1":
            assert "FSDP1 only" in fsdp2_cell, f"{key}: FSDP2 drops it; say so"
        for version, cell in ((1, fsdp1_cell), (2, fsdp2_cell)):
            if row[f"effect_v{version}"] == "ignored":  # found by running the launcher
                assert "ignored" in cell or "FSDP1 only" in cell, f"{key}: FSDP{version} ignores it"
        if plugin["only"] == "fsdp2":
            assert "FSDP2 only" in fsdp1_cell, f"{key}: needs FSDP2; say so"
    named = {_code(r[0]) for r in rows}
    asked = {k for k, r in CONFIG.items() if r["asked_by_config"]}
    assert asked <= named, f"keys `accelerate config` writes but the table lacks: {asked - named}"


def test_trainer_guide_table_agrees_with_the_data_file():
    rows = _table_rows("trainer-fsdp", "`fsdp_config` key")
    assert len(rows) >= 10
    for key_cell, field_cell, applies_cell, default_cell in rows:
        key = _code(key_cell)
        assert key in TRAINER, f"{key}: not read by TrainingArguments"
        row = TRAINER[key]
        assert _code(field_cell) == (row["field"] or "—"), key
        expected = {"": "FSDP1 and FSDP2", "fsdp1": "FSDP1 only", "fsdp2": "FSDP2 only"}
        assert applies_cell == expected[row["only"]], f"{key}: {applies_cell!r}"
        assert _code(default_cell) == (row["default"] or "—"), f"{key}: {default_cell!r}"
    named = {_code(r[0]) for r in rows}
    mapped = {k for k, r in TRAINER.items() if r["field"]}
    assert mapped <= named, f"keys that set a plugin argument but the table lacks: {mapped - named}"


def test_loader_reads_the_file_without_importing_hf_packages():
    import subprocess
    import sys

    code = (
        "import sys; from fsdp_skill import knowledge; data = knowledge.hf_fsdp_keys(); "
        "assert data['accelerate_config'] and data['trainer_fsdp_config']; "
        "assert not {'torch', 'accelerate', 'transformers'} & set(sys.modules), sorted(sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
