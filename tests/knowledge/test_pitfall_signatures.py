"""Error signatures that claim to be reproduced are matched against the real error text.

``repro_errors.py`` provokes each error in a fresh interpreter (world size 1 on Gloo, or the
in-memory ``fake`` backend) and prints the messages; a pitfall whose ``signature_source`` reads
``reproduced: tests/knowledge/repro_errors.py (case NAME)`` must match the message of NAME.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fsdp_skill import knowledge
from tests.knowledge.texts import flat, guide
from tests.signatures import recognises

HERE = Path(__file__).parent
REPO = HERE.parent.parent
SCRIPT = HERE / "repro_errors.py"
_CASE = re.compile(r"^reproduced: tests/knowledge/repro_errors\.py \(case (\w+)\)$")

CLAIMS = [
    (p, _CASE.match(p.signature_source).group(1))
    for p in knowledge.pitfalls()
    if _CASE.match(p.signature_source or "")
]


@pytest.fixture(scope="module")
def messages() -> dict[str, str]:
    result = subprocess.run(
        [sys.executable, str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def test_some_pitfalls_use_the_script():
    assert len(CLAIMS) >= 5


@pytest.mark.parametrize("pitfall,case", CLAIMS, ids=[p.id for p, _ in CLAIMS])
def test_signature_matches_reproduced_error(pitfall, case, messages):
    assert case in messages, f"{pitfall.id}: repro_errors.py has no case {case!r}"
    text = messages[case]
    assert text, f"{case}: torch raised nothing"
    assert recognises(pitfall, text), f"{pitfall.id}: no signature matches {text!r}"


def test_mesh_pitfall_matches_the_slice_and_the_group_lookup(messages):
    """Slicing and ``get_group`` word an unknown dimension differently; both are the pitfall."""
    pitfall = knowledge.pitfall("device-mesh-slice-unknown-name")
    for case in ("mesh_slice_unknown_name", "mesh_group_unknown_name"):
        text = messages[case]
        assert recognises(pitfall, text), (case, text)


def test_reproduced_sources_name_existing_files():
    for p in knowledge.pitfalls():
        source = p.signature_source or ""
        if source.startswith("reproduced:"):
            path = source.removeprefix("reproduced:").strip().split()[0].rstrip(",;")
            assert (REPO / path).exists(), f"{p.id}: {path} does not exist"


def test_spawn_pitfalls_read_each_way_a_child_ends(messages):
    """mp.spawn words a child's exit, its exception and its death by a signal differently:
    the first two are the child's own error, the last a kill."""
    exited = knowledge.pitfall("spawn-child-exited")
    killed = knowledge.pitfall("rank-killed-by-signal")
    assert recognises(exited, messages["spawn_child_exits"])
    assert recognises(exited, messages["spawn_child_raises"])
    assert "the child's own error" in messages["spawn_child_raises"]  # the traceback travels
    assert recognises(killed, messages["spawn_child_killed"])
    assert not recognises(exited, messages["spawn_child_killed"])


def test_nproc_per_node_pitfall_reads_an_empty_value(messages):
    """A launch script's unset variable leaves nothing after the colon."""
    pitfall = knowledge.pitfall("torchrun-nproc-per-node-value")
    assert messages["torchrun_nproc_per_node_unset"].endswith("value: ")
    assert recognises(pitfall, messages["torchrun_nproc_per_node_unset"])


def test_the_seed_section_quotes_fsdp1s_refusal_to_sync_cpu_modules(messages):
    """migrate-ddp-to-fsdp, 'Seeds and initialisation': FSDP1 copies rank 0's module only
    from the GPU; the section quotes the error for CPU parameters."""
    message = messages["fsdp1_sync_module_states_on_cpu"].replace("`", "")
    quoted = "ValueError: The module has CPU parameters or buffers when sync_module_states=True, "
    quoted += "which requires them to be on GPU."
    assert message.startswith(quoted), message
    body = flat(guide("migrate-ddp-to-fsdp").body)
    assert quoted in body


def test_adamw_given_sgds_state_fails_like_an_empty_group():
    """dcp-empty-param-group: the other cause of the same KeyError that its fix names."""
    import torch

    model = torch.nn.Linear(2, 2)
    adamw = torch.optim.AdamW(model.parameters())
    adamw.load_state_dict(torch.optim.SGD(model.parameters(), lr=0.1).state_dict())
    model(torch.ones(1, 2)).sum().backward()
    with pytest.raises(KeyError, match="betas"):
        adamw.step()
    assert "AdamW given an SGD optimizer's `state_dict`" in " ".join(
        knowledge.pitfall("dcp-empty-param-group").fix.split()
    )
