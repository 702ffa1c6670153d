"""Each rule is documented by one pitfall: its bad code is flagged, its good code is clean."""

from __future__ import annotations

import pytest

from fsdp_skill import knowledge
from fsdp_skill.lint import lint_source
from fsdp_skill.lint.rules import CODES, all_rules

RULES = {r.code: r for r in all_rules()}


def test_every_code_has_a_rule():
    assert sorted(RULES) == list(CODES)


@pytest.mark.parametrize("code", CODES)
def test_rule_has_exactly_one_pitfall(code):
    documented = [p for p in knowledge.pitfalls() if p.lint == code]
    assert [p.id for p in documented] == [RULES[code].pitfall]
    assert documented[0].severity == RULES[code].severity


@pytest.mark.parametrize("code", CODES)
def test_bad_example_is_flagged(code):
    pitfall = knowledge.pitfall(RULES[code].pitfall)
    found = [f["code"] for f in lint_source(pitfall.bad, "bad.py")["findings"]]
    assert code in found


@pytest.mark.parametrize("code", CODES)
def test_good_example_has_no_finding_at_all(code):
    pitfall = knowledge.pitfall(RULES[code].pitfall)
    result = lint_source(pitfall.good, "good.py")
    assert result["errors"] == []
    assert result["findings"] == [], result["findings"]


NEWER_APIS = {
    "device_id=": (2, 3),
    "StateDictOptions": (2, 2),
    "dcp.save": (2, 2),
    'torch.amp.GradScaler("cuda")': (2, 4),
    "fully_shard (from torch.distributed.fsdp)": (2, 6),
    "from torch.distributed.fsdp\n": (2, 6),
}


@pytest.mark.parametrize("code", CODES)
@pytest.mark.parametrize("version", [(2, 0), (2, 1), (2, 3), (2, 5), (2, 13)])
def test_advice_only_names_apis_the_version_has(code, version):
    advice = RULES[code].fix(version) + "\n"
    for api, since in NEWER_APIS.items():
        if version < since:
            assert api not in advice, f"{code} advises {api} for torch {version}"


def test_device_id_does_not_set_the_current_device_in_installed_torch():
    """FSDP005 and its pitfall say that ``init_process_group(device_id=...)`` binds the group
    to a device without calling ``set_device``: check that in the installed torch's source."""
    import inspect

    import torch.distributed.distributed_c10d as c10d

    source = inspect.getsource(c10d.init_process_group)
    assert "device_id" in inspect.signature(c10d.init_process_group).parameters
    assert "bound_device_id" in inspect.getsource(c10d._new_process_group_helper)
    assert "set_device" not in source
    text = " ".join(knowledge.pitfall("nccl-without-per-rank-device").cause.split())
    assert "never calls `set_device`" in text
