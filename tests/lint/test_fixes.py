"""``fsdp-skill lint --diff`` / ``--fix``: the mechanical fixes (FSDP007 reduce_dtype, FSDP013
launch lines, FSDP014 destroy_process_group), what they never touch, and how they write."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from fsdp_skill.lint import fix_paths, lint_paths
from tests.cli import fsdp

REDUCE_BF16 = """\
import torch
from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision

policy = MixedPrecision(
    param_dtype=torch.bfloat16,
    reduce_dtype=torch.bfloat16,
)


def wrap(model, wrap_policy):
    return FullyShardedDataParallel(model, auto_wrap_policy=wrap_policy, mixed_precision=policy)
"""

PARAM_ONLY = """\
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def shard(model):
    fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.float16))
"""

MAIN_WITHOUT_DESTROY = """\
import torch.distributed as dist


def setup():
    dist.init_process_group("gloo")


def main():
    setup()
    print("training")


if __name__ == "__main__":
    main()
"""


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _codes(path: Path) -> list[str]:
    return [f["code"] for f in lint_paths([str(path)])["findings"]]


def test_reduce_dtype_is_set_to_float32(tmp_path):
    path = _write(tmp_path, "train.py", REDUCE_BF16)
    result = fix_paths([str(path)], write=True)
    assert [f["code"] for f in result["fixes"]] == ["FSDP007"]
    assert "reduce_dtype=torch.float32," in path.read_text()
    assert "FSDP007" not in _codes(path)


def test_missing_reduce_dtype_is_added(tmp_path):
    path = _write(tmp_path, "shard.py", PARAM_ONLY)
    fix_paths([str(path)], write=True)
    assert "param_dtype=torch.float16, reduce_dtype=torch.float32)" in path.read_text()
    assert "FSDP007" not in _codes(path)


def test_a_dtype_from_a_variable_is_not_rewritten(tmp_path):
    text = REDUCE_BF16.replace("reduce_dtype=torch.bfloat16", "reduce_dtype=low")
    text = text.replace(
        "from torch.distributed.fsdp", "low = torch.bfloat16\nfrom torch.distributed.fsdp"
    )
    path = _write(tmp_path, "train.py", text)
    assert fix_paths([str(path)], write=True)["fixes"] == []
    assert path.read_text() == text


def test_destroy_goes_at_the_end_of_main(tmp_path):
    path = _write(tmp_path, "train.py", MAIN_WITHOUT_DESTROY)
    fix_paths([str(path)], write=True)
    assert '    print("training")\n    dist.destroy_process_group()\n' in path.read_text()
    assert "FSDP014" not in _codes(path)


def test_destroy_after_a_setup_helper_goes_at_the_end_of_the_script(tmp_path):
    text = (
        "import torch.distributed as dist\n\n\ndef setup():\n    dist.init_process_group('gloo')\n"
        "\n\nif __name__ == '__main__':\n    setup()\n    print('training')\n"
    )
    path = _write(tmp_path, "train.py", text)
    fix_paths([str(path)], write=True)
    fixed = path.read_text()
    assert fixed.endswith("    print('training')\n    dist.destroy_process_group()\n")
    assert "    dist.init_process_group('gloo')\n\n" in fixed  # not right after the init


def test_destroy_ends_a_spawned_worker(tmp_path):
    text = (
        "import torch.distributed as dist\nimport torch.multiprocessing as mp\n\n\n"
        "def worker(rank, world):\n    dist.init_process_group('gloo', rank=rank, world_size=world)\n"
        "    print(rank)\n\n\nif __name__ == '__main__':\n    mp.spawn(worker, args=(2,), nprocs=2)\n"
    )
    path = _write(tmp_path, "train.py", text)
    fix_paths([str(path)], write=True)
    assert "    print(rank)\n    dist.destroy_process_group()\n" in path.read_text()


@pytest.mark.parametrize(
    "change",
    [
        # the init may not run: an unconditional destroy could meet no group
        (
            '    dist.init_process_group("gloo")',
            '    if True:\n        dist.init_process_group("gloo")',
        ),
        # main may return early: the end of main is not the end of the program
        ('    print("training")', '    if input():\n        return\n    print("training")'),
        # setup is called twice: which call's end?
        ("    setup()\n", "    setup()\n    setup()\n"),
        # a decorator may skip setup (accelerate's test scripts use such skips)
        ("def setup():", "@require_gpu\ndef setup():"),
    ],
    ids=["init-under-if", "early-return", "two-callers", "decorated-setup"],
)
def test_destroy_is_not_added_where_the_end_is_ambiguous(tmp_path, change):
    text = MAIN_WITHOUT_DESTROY.replace(*change)
    path = _write(tmp_path, "train.py", text)
    assert "FSDP014" in _codes(path)
    assert fix_paths([str(path)], write=True)["fixes"] == []
    assert path.read_text() == text


def test_launch_line_with_use_env_becomes_torchrun(tmp_path):
    text = (
        "import subprocess\n\n"
        "subprocess.run('python -m torch.distributed.launch --use-env --nproc_per_node=2 t.py', shell=True)\n"
        "cmd = ['python', '-m', 'torch.distributed.launch', '--use_env', '--nproc_per_node=2', 't.py']\n"
    )
    path = _write(tmp_path, "launch.py", text)
    fix_paths([str(path)], write=True)
    fixed = path.read_text()
    assert "'torchrun --nproc_per_node=2 t.py'" in fixed
    assert "['python', '-m', 'torch.distributed.run', '--nproc_per_node=2', 't.py']" in fixed
    assert "FSDP013" not in _codes(path)


def test_launch_line_without_use_env_is_left_alone(tmp_path):
    """Without --use-env the launcher passes --local-rank to the script (torch's launch.py),
    which torchrun never does: switching could break the script."""
    text = "import os\n\nos.system('python -m torch.distributed.launch --nproc_per_node=2 t.py')\n"
    path = _write(tmp_path, "launch.py", text)
    assert fix_paths([str(path)], write=True)["fixes"] == []
    assert path.read_text() == text


def test_noqa_keeps_a_finding_and_its_code(tmp_path):
    text = REDUCE_BF16.replace(
        "policy = MixedPrecision(", "policy = MixedPrecision(  # noqa: FSDP007"
    )
    path = _write(tmp_path, "train.py", text)
    assert fix_paths([str(path)], write=True)["fixes"] == []
    assert path.read_text() == text


def test_a_second_fix_changes_nothing(tmp_path):
    for name, text in (("a.py", REDUCE_BF16), ("b.py", PARAM_ONLY), ("c.py", MAIN_WITHOUT_DESTROY)):
        _write(tmp_path, name, text)
    first = fix_paths([str(tmp_path)], write=True)
    assert len(first["fixes"]) == 3
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    second = fix_paths([str(tmp_path)], write=True)
    assert second["fixes"] == [] and second["diff"] == ""
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == after


def test_diff_shows_the_fix_and_writes_nothing(tmp_path):
    path = _write(tmp_path, "train.py", REDUCE_BF16)
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    run = fsdp("lint", path, "--diff")
    assert run.code == 1  # as lint: there are findings
    assert run.out.startswith(f"--- a/{path}\n+++ b/{path}\n@@")
    assert "-    reduce_dtype=torch.bfloat16,\n+    reduce_dtype=torch.float32,\n" in run.out
    assert "would apply 1 fix in 1 file" in run.err
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_fix_reports_what_it_fixed_and_exits_0_when_nothing_is_left(tmp_path):
    path = _write(tmp_path, "train.py", REDUCE_BF16)
    run = fsdp("lint", path, "--fix")
    assert run.code == 0, run.out + run.err
    assert f"fixed: {path}:4: FSDP007 reduce_dtype set to float32" in run.out
    assert "0 findings in 1 file" in run.out
    json_run = fsdp("lint", path, "--fix", "--json")
    assert json_run.code == 0 and json_run.json()["fixes"] == []


def test_fix_exits_1_when_findings_remain(tmp_path):
    path = _write(
        tmp_path, "train.py", REDUCE_BF16.replace("bfloat16,\n    reduce", "float16,\n    reduce")
    )
    run = fsdp("lint", path, "--fix", "--json")
    assert run.code == 1  # FSDP006 (fp16 without a scaler) is no mechanical fix
    result = run.json()
    assert [f["code"] for f in result["fixes"]] == ["FSDP007"]
    assert [f["code"] for f in result["findings"]] == ["FSDP006"]


def test_a_file_with_a_syntax_error_is_never_touched(tmp_path):
    broken = _write(tmp_path, "broken.py", REDUCE_BF16 + "def oops(:\n")
    good = _write(tmp_path, "good.py", REDUCE_BF16)
    before = broken.read_bytes()
    run = fsdp("lint", tmp_path, "--fix")
    assert run.code == 1
    assert broken.read_bytes() == before
    assert "syntax error" in run.out
    assert "reduce_dtype=torch.float32" in good.read_text()


def test_fix_writes_aside_and_renames_keeping_mode_bits(tmp_path):
    path = _write(tmp_path, "train.py", REDUCE_BF16)
    path.chmod(0o750)
    inode = path.stat().st_ino
    fix_paths([str(path)], write=True)
    assert stat.S_IMODE(path.stat().st_mode) == 0o750
    assert path.stat().st_ino != inode  # a new file renamed over the old one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]  # nothing left aside


def test_a_symlink_stays_a_link_and_its_target_is_fixed(tmp_path):
    target = _write(tmp_path, "real.py", REDUCE_BF16)
    link = tmp_path / "link.py"
    link.symlink_to(target)
    fix_paths([str(link)], write=True)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert "reduce_dtype=torch.float32" in target.read_text()


def test_line_endings_and_byte_order_mark_are_kept(tmp_path):
    path = tmp_path / "train.py"
    path.write_bytes(b"\xef\xbb\xbf" + MAIN_WITHOUT_DESTROY.replace("\n", "\r\n").encode())
    fix_paths([str(path)], write=True)
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")
    assert b"\r\n    dist.destroy_process_group()\r\n" in data
    assert b"\n" not in data.replace(b"\r\n", b"")


def test_a_file_changed_while_linting_is_not_overwritten(tmp_path, monkeypatch):
    import fsdp_skill.lint as lint

    path = _write(tmp_path, "train.py", REDUCE_BF16)
    real = lint._write_fixed

    def edit_first(item):
        path.write_text(REDUCE_BF16 + "# the user's edit\n", encoding="utf-8")
        return real(item)

    monkeypatch.setattr(lint, "_write_fixed", edit_first)
    result = fix_paths([str(path)], write=True)
    assert result["fixes"] == []
    assert any("changed while it was being linted" in e["message"] for e in result["errors"])
    assert path.read_text().endswith("# the user's edit\n")


def test_diff_and_fix_together_or_on_stdin_are_usage_errors(tmp_path):
    path = _write(tmp_path, "train.py", REDUCE_BF16)
    both = fsdp("lint", path, "--diff", "--fix")
    assert both.code == 2 and "choose one" in both.err
    stdin = fsdp("lint", "-", "--fix", input=REDUCE_BF16)
    assert stdin.code == 2 and "need files" in stdin.err
