"""Files and folders: .gitignore, excludes, configuration, noqa, and every kind of bad input."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fsdp_skill.errors import UsageError
from fsdp_skill.lint import lint_paths, lint_source

BAD = "import torch.distributed as dist\n\nif dist.get_rank() == 0:\n    dist.barrier()\n"
GOOD = "import torch\n\nx = torch.ones(2)\n"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _codes(result: dict) -> list[str]:
    return [f["code"] for f in result["findings"]]


def test_folder_walk_honours_gitignore_and_default_excludes(tmp_path: Path):
    (tmp_path / ".git").mkdir()
    _write(tmp_path / ".gitignore", "generated/\n*_tmp.py\n!keep_tmp.py\n")
    _write(tmp_path / "train.py", BAD)
    _write(tmp_path / "generated" / "a.py", BAD)
    _write(tmp_path / "scratch_tmp.py", BAD)
    _write(tmp_path / "keep_tmp.py", BAD)
    _write(tmp_path / ".venv" / "lib.py", BAD)
    _write(tmp_path / "pkg" / "sub" / "deep.py", BAD)
    _write(tmp_path / "pkg" / "sub" / ".gitignore", "deep.py\n")
    _write(tmp_path / "notes.txt", BAD)
    result = lint_paths([str(tmp_path)])
    linted = sorted(Path(f["path"]).relative_to(tmp_path).as_posix() for f in result["findings"])
    assert linted == ["keep_tmp.py", "train.py"]
    assert result["files"] == 2


def test_pyproject_config_select_ignore_exclude(tmp_path: Path):
    _write(
        tmp_path / "pyproject.toml",
        '[tool.fsdp-skill.lint]\nignore = ["FSDP003"]\nexclude = ["legacy/*"]\n',
    )
    _write(tmp_path / "a.py", BAD + "dist.init_process_group('gloo')\n")
    _write(tmp_path / "legacy" / "old.py", BAD)
    result = lint_paths([str(tmp_path)])
    assert _codes(result) == ["FSDP014"]
    assert result["files"] == 1
    # the command line's --select replaces the config's rule list, --ignore adds to it
    assert _codes(lint_paths([str(tmp_path)], select=["FSDP003"])) == []
    assert _codes(lint_paths([str(tmp_path)], ignore=["FSDP014"])) == []


def test_nearest_pyproject_wins(tmp_path: Path):
    _write(tmp_path / "pyproject.toml", '[tool.fsdp-skill.lint]\nselect = ["FSDP014"]\n')
    _write(tmp_path / "inner" / "pyproject.toml", "[project]\nname = 'x'\n")
    _write(tmp_path / "inner" / "a.py", BAD)
    assert _codes(lint_paths([str(tmp_path / "inner")])) == ["FSDP003"]


def test_bad_config_is_a_usage_error(tmp_path: Path):
    _write(tmp_path / "pyproject.toml", '[tool.fsdp-skill.lint]\nselct = ["FSDP001"]\n')
    _write(tmp_path / "a.py", BAD)
    with pytest.raises(UsageError, match="selct"):
        lint_paths([str(tmp_path)])


def test_noqa_silences_only_the_named_code():
    assert _codes(lint_source(BAD.replace("barrier()", "barrier()  # noqa: FSDP003"))) == []
    assert _codes(lint_source(BAD.replace("barrier()", "barrier()  # noqa: FSDP001"))) == [
        "FSDP003"
    ]
    assert _codes(lint_source(BAD.replace("barrier()", "barrier()  # noqa"))) == []


def test_select_and_ignore_accept_prefixes_and_reject_unknown_codes():
    assert _codes(lint_source(BAD, select=["FSDP00"])) == ["FSDP003"]
    assert _codes(lint_source(BAD, ignore=["fsdp003"])) == []
    with pytest.raises(UsageError, match="FSDP999"):
        lint_source(BAD, select=["FSDP999"])


def test_finding_shape():
    (finding,) = lint_source(BAD, "train.py")["findings"]
    assert finding["path"] == "train.py"
    assert (finding["line"], finding["col"]) == (4, 5)
    assert finding["severity"] == "error"
    assert finding["ref"] == "pitfall:collective-under-rank-condition"
    assert finding["fix"] and finding["message"]


def test_torch_version_changes_the_advice():
    code = (
        "import torch\nfrom torch.distributed.fsdp import fully_shard\n"
        "m = torch.nn.Sequential(torch.nn.Linear(2, 2))\nfully_shard(m)\nfor x in m:\n"
        "    fully_shard(x)\n"
    )
    new = lint_source(code, torch_version="2.13")["findings"][0]["fix"]
    old = lint_source(code, torch_version="2.5")["findings"][0]["fix"]
    assert "torch.distributed.fsdp" in new and "_composable" not in new
    assert "torch.distributed._composable.fsdp" in old
    with pytest.raises(UsageError):
        lint_source(code, torch_version="two")


def test_syntax_error_non_utf8_binary_large_loop_missing_are_errors(tmp_path: Path):
    good = _write(tmp_path / "good.py", BAD)
    broken = _write(tmp_path / "broken.py", "def f(:\n")
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"x = '\xe9t\xe9'\n")
    binary = tmp_path / "blob.py"
    binary.write_bytes(b"\x7fELF\x00\x00\x01binary")
    big = tmp_path / "big.py"
    with big.open("wb") as handle:
        handle.truncate(50 * 1024 * 1024)
    loop = tmp_path / "loop.py"
    os.symlink(loop, loop)
    missing = tmp_path / "missing.py"
    paths = [good, broken, latin, binary, big, loop, missing]
    result = lint_paths([str(p) for p in paths])
    errors = {Path(e["path"]).name: e["message"] for e in result["errors"]}
    assert result["files"] == 1 and _codes(result) == ["FSDP003"]
    assert "syntax error" in errors["broken.py"]
    assert "not UTF-8" in errors["latin.py"]
    assert "binary" in errors["blob.py"]
    assert "too large" in errors["big.py"]
    assert "symlink loop" in errors["loop.py"]
    assert "no such file" in errors["missing.py"]


def test_symlink_loop_inside_a_folder_is_reported_and_the_rest_checked(tmp_path: Path):
    _write(tmp_path / "a.py", BAD)
    os.symlink(tmp_path / "b.py", tmp_path / "b.py")
    os.symlink(tmp_path, tmp_path / "again")  # a folder link back to the root: not followed
    result = lint_paths([str(tmp_path)])
    assert result["files"] == 1
    assert [Path(e["path"]).name for e in result["errors"]] == ["b.py"]


def test_coding_cookie_is_honoured(tmp_path: Path):
    path = tmp_path / "latin1.py"
    path.write_bytes(b"# -*- coding: latin-1 -*-\nname = '\xe9'\n" + BAD.encode())
    result = lint_paths([str(path)])
    assert result["errors"] == [] and _codes(result) == ["FSDP003"]


def test_lint_source_reports_syntax_errors():
    result = lint_source("def (:", "x.py")
    assert result["files"] == 0 and "syntax error" in result["errors"][0]["message"]


def test_source_without_torch_is_skipped_quickly():
    assert lint_source(GOOD.replace("torch", "numpy"))["findings"] == []


def test_a_failing_rule_is_reported_and_the_others_still_run(monkeypatch):
    from fsdp_skill.lint import rules

    def broken(model):
        raise KeyError("boom")
        yield  # pragma: no cover

    patched = tuple(
        rules.Rule(r.code, r.pitfall, r.severity, r.summary, r.fix, broken)
        if r.code == "FSDP001"
        else r
        for r in rules.all_rules()
    )
    monkeypatch.setattr("fsdp_skill.lint.engine.all_rules", lambda: patched)
    result = lint_source(BAD, "x.py")
    assert _codes(result) == ["FSDP003"]
    assert result["errors"] == [
        {"path": "x.py", "message": "FSDP001 failed on this file: KeyError: 'boom'"}
    ]


def test_too_deeply_nested_code_is_an_error_not_a_crash():
    result = lint_source("import torch\nx = " + "-" * 20000 + "1\n", "deep.py")
    assert result["errors"] and "nested" in result["errors"][0]["message"]


def test_pyproject_torch_version_sets_the_advice(tmp_path: Path):
    code = "import torch\nfrom torch.distributed.fsdp import fully_shard\nfully_shard(m)\nm.forward(x)\n"
    _write(tmp_path / "pyproject.toml", '[tool.fsdp-skill.lint]\ntorch-version = "2.5"\n')
    _write(tmp_path / "a.py", code)
    (finding,) = lint_paths([str(tmp_path)])["findings"]
    assert finding["code"] == "FSDP018" and "_composable" in finding["fix"]
    (finding,) = lint_paths([str(tmp_path)], torch_version="2.8")["findings"]
    assert "_composable" not in finding["fix"]


def test_devices_and_pipes_are_refused_not_read(tmp_path: Path):
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    result = lint_paths([str(fifo), "/dev/zero"])
    assert result["files"] == 0
    assert [e["message"] for e in result["errors"]] == ["not a regular file"] * 2


def test_a_pipe_inside_a_folder_is_reported_not_read(tmp_path: Path):
    _write(tmp_path / "a.py", BAD)
    os.mkfifo(tmp_path / "b.py")
    result = lint_paths([str(tmp_path)])
    assert result["files"] == 1 and _codes(result) == ["FSDP003"]
    assert [(Path(e["path"]).name, e["message"]) for e in result["errors"]] == [
        ("b.py", "not a regular file")
    ]


def test_file_level_noqa():
    assert _codes(lint_source("# fsdp-skill: noqa\n" + BAD)) == []
    assert _codes(lint_source("# fsdp-skill: noqa: FSDP003\n" + BAD)) == []
    assert _codes(lint_source("# fsdp-skill: noqa: FSDP001\n" + BAD)) == ["FSDP003"]
    assert _codes(lint_source("x = 1  # fsdp-skill: noqa\n" + BAD)) == ["FSDP003"]


def test_per_file_ignores(tmp_path: Path):
    _write(
        tmp_path / "pyproject.toml",
        '[tool.fsdp-skill.lint]\nper-file-ignores = { "repro/*" = ["FSDP003"] }\n',
    )
    _write(tmp_path / "repro" / "hang.py", BAD)
    _write(tmp_path / "train.py", BAD)
    result = lint_paths([str(tmp_path)])
    assert [Path(f["path"]).name for f in result["findings"]] == ["train.py"]
