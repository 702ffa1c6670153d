"""The mined model classes (knowledge/hf_model_classes.json) are those of the installed
transformers and torch, and lint reads them (and checks configs) without importing either."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fsdp_skill.references import hf_models

pytest.importorskip("transformers")


def test_data_file_matches_the_installed_packages():
    fresh = hf_models.render(hf_models.mine())
    stored = hf_models.DATA_FILE.read_text(encoding="utf-8")
    assert fresh == stored, "hf_model_classes.json is stale: run scripts/mine_hf_keys.py"


def test_mined_classes_include_what_a_real_model_holds():
    from transformers import LlamaConfig, LlamaForCausalLM

    data = json.loads(hf_models.DATA_FILE.read_text(encoding="utf-8"))
    small = LlamaConfig(
        hidden_size=16,
        num_attention_heads=2,
        num_hidden_layers=1,
        intermediate_size=32,
        vocab_size=64,
    )
    held = {type(m).__name__ for m in LlamaForCausalLM(small).modules()}
    known = set(data["modules"]["llama"]["classes"]) | set(data["torch_nn"])
    known |= set(data["transformers_common"])
    assert held <= known, held - known
    assert data["modules"]["llama"]["no_split"] == ["LlamaDecoderLayer"]


def test_config_lint_imports_neither_torch_nor_hf_packages(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 8}))
    (tmp_path / "fsdp.yaml").write_text(
        "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n"
        "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
        "  fsdp_transformer_layer_cls_to_wrap: BertLayer\n"
    )
    code = (
        "import sys; from fsdp_skill.lint import lint_paths; "
        f"r = lint_paths([{str(tmp_path)!r}], model_config={str(tmp_path / 'config.json')!r}); "
        "assert [f['code'] for f in r['findings']] == ['FSDP105'], r; "
        "assert not {'torch', 'accelerate', 'transformers'} & set(sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
