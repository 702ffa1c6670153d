"""``hang`` on inputs that are broken, partial, binary or huge: clear messages, no traceback,
exit status 2 only when nothing at all could be read."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from fsdp_skill.diagnose import hang
from fsdp_skill.errors import UsageError
from tests.cli import fsdp
from tests.diagnose.synth import Fault, history, nccl_lines, write_nccl


def test_empty_folder_is_bad_usage(tmp_path):
    with pytest.raises(UsageError, match="empty folder"):
        hang([str(tmp_path)])
    result = fsdp("hang", str(tmp_path))
    assert result.code == 2
    assert result.err.startswith("fsdp-skill: error: nothing to analyse")
    assert "Traceback" not in result.err
    assert result.out == ""


def test_hidden_folders_under_a_log_folder_are_not_read(tmp_path):
    logs = tmp_path / "logs"
    write_nccl(logs, 2, Fault("none"))
    write_nccl(logs / ".git" / "objects", 3, Fault("none"))
    report = hang([str(logs)])
    read = sorted(Path(i["path"]).name for i in report["inputs"])
    assert read == ["nccl-rank0.log", "nccl-rank1.log"]
    assert report["ranks"] == 2


def test_missing_path_and_no_path(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        hang([str(tmp_path / "nope.log")])
    with pytest.raises(UsageError, match="at least one"):
        hang([])


def test_binary_garbage_alone_is_unreadable(tmp_path):
    (tmp_path / "core.bin").write_bytes(bytes(range(256)) * 4096)
    result = fsdp("hang", str(tmp_path / "core.bin"))
    assert result.code == 2
    assert "nothing to analyse" in result.err


def test_binary_garbage_next_to_good_logs_is_a_warning(tmp_path):
    write_nccl(tmp_path, 3, Fault("missing", rank=2, seq=5))
    (tmp_path / "core.bin").write_bytes(b"\x00\x01\xff\xfe" * 10000)
    result = hang([str(tmp_path)])
    assert result["culprit_ranks"] == [2]
    assert any("core.bin" in w and "binary" in w for w in result["warnings"])


def test_truncated_lines(tmp_path):
    write_nccl(tmp_path, 3, Fault("size", rank=1, seq=6))
    log = tmp_path / "nccl-rank0.log"
    log.write_bytes(log.read_bytes() + b"gpu-node000:4000:4050 [0] NCCL INFO AllRed")
    result = hang([str(tmp_path)])
    assert (result["verdict"], result["culprit_ranks"]) == ("size-mismatch", [1])
    assert any("no newline" in w for w in result["warnings"])


def test_mixed_encodings(tmp_path):
    write_nccl(tmp_path, 3, Fault("op", rank=0, seq=4))
    log = tmp_path / "nccl-rank2.log"
    latin1 = "Traceback (most recent call last):\nOSError: fichier d\u00e9truit\n".encode("latin-1")
    log.write_bytes(log.read_bytes() + latin1 + "d\u00e9j\u00e0 vu\n".encode("utf-8"))
    result = hang([str(tmp_path)])
    assert (result["verdict"], result["culprit_ranks"]) == ("op-mismatch", [0])
    assert any("Latin-1" in w for w in result["warnings"])


def test_one_rank_only(tmp_path):
    write_nccl(tmp_path, 1, Fault("none"))
    result = fsdp("hang", "--json", str(tmp_path))
    assert result.code == 0
    data = json.loads(result.out)
    assert data["ranks"] == 1
    assert data["verdict"] == "no-divergence"
    assert any("only one rank" in w for w in data["warnings"])


def test_unrecognised_text_is_reported(tmp_path):
    write_nccl(tmp_path, 3, Fault("missing", rank=1, seq=3))
    (tmp_path / "notes.txt").write_text("nothing to see here\n")
    result = hang([str(tmp_path)])
    notes = next(i for i in result["inputs"] if i["path"].endswith("notes.txt"))
    assert notes["kind"] == "unrecognised"
    assert result["culprit_ranks"] == [1]


def test_malicious_pickle_is_refused(tmp_path):
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    (tmp_path / "fr_rank0").write_bytes(pickle.dumps({"entries": [Exploit()]}))
    result = fsdp("hang", str(tmp_path / "fr_rank0"))
    assert result.code == 2
    assert "refused to load" in result.err
    assert not marker.exists()


def test_two_gigabyte_file_is_streamed(tmp_path):
    """A sparse 2 GiB log with collectives before and after a hole: read in chunks, with memory
    far below the file's size."""
    world, fault = 3, Fault("missing", rank=0, seq=9)
    write_nccl(tmp_path, world, fault)
    big = tmp_path / "nccl-rank1.log"
    lines = nccl_lines(1, world, history(1, fault, 40))
    with big.open("wb") as fh:
        fh.write(("\n".join(lines[:6]) + "\n").encode())
        fh.seek(2 << 30)
        fh.write(("\n".join(lines[6:]) + "\n").encode())
    assert big.stat().st_size > 2 << 30
    code = (
        "import json, re\n"
        "from fsdp_skill.diagnose import hang\n"
        f"r = hang([{str(tmp_path)!r}])\n"
        # VmHWM is this process's own peak; ru_maxrss would include the parent's at fork time
        "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
        "print(json.dumps({'culprits': r['culprit_ranks'], 'warnings': r['warnings'],"
        " 'rss_kb': int(hwm)}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    data = json.loads(out.stdout)
    assert data["culprits"] == [0]
    assert any("binary data" in w for w in data["warnings"])
    assert data["rss_kb"] < 300 * 1024, f"peak memory {data['rss_kb']} KiB for a 2 GiB file"


def test_unreadable_file_is_reported(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    write_nccl(tmp_path, 3, Fault("missing", rank=1, seq=3))
    locked = tmp_path / "rank9.log"
    locked.write_text("x\n")
    locked.chmod(0)
    result = hang([str(tmp_path)])
    assert any("cannot read" in w for w in result["warnings"])


def test_huge_line_without_newline(tmp_path: Path):
    write_nccl(tmp_path, 3, Fault("extra", rank=2, seq=5))
    (tmp_path / "rank7.log").write_bytes(b"x" * (3 << 20))
    result = hang([str(tmp_path)])
    assert result["culprit_ranks"] == [2]
    assert any("over-long" in w for w in result["warnings"])


def test_lost_nccl_lines_are_reported(tmp_path):
    write_nccl(tmp_path, 3, Fault("op", rank=2, seq=20))
    log = tmp_path / "nccl-rank1.log"
    lines = log.read_text().splitlines(keepends=True)
    del lines[5]  # one collective's line lost (e.g. interleaved writes)
    log.write_text("".join(lines))
    result = hang([str(tmp_path)])
    assert any("not contiguous" in w for w in result["warnings"])
    # the gap is not taken for a divergence: the injected one still is
    assert (result["verdict"], result["culprit_ranks"]) == ("op-mismatch", [2])
    assert result["first_divergence"]["seq"] == 20


def _watchdog(rank: str, seq: str) -> str:
    return (
        f"[rank0]:[PG ID 0 PG GUID 0(default_pg) Rank {rank}] Watchdog caught collective "
        f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=16, NumelOut=16, "
        "Timeout(ms)=600000) ran for 600042 milliseconds before timing out.\n"
    )


@pytest.mark.parametrize(
    "line",
    [
        _watchdog("9" * 5000, "7"),  # past int()'s digit limit
        _watchdog(str(2**40), "7"),  # a rank no job has
        _watchdog("1", "9" * 30),  # a sequence number past 64 bits
        "gpu-node0:4000:4050 [0] NCCL INFO comm 0x55d1 rank 0 nranks "
        + "9" * 20
        + " cudaDev 0 busId 1000 commId 0x7f3e - Init COMPLETE\n",  # world size 10**20
    ],
    ids=["rank-digits", "rank-huge", "seq-huge", "world-huge"],
)
def test_numbers_no_real_log_holds_are_skipped(tmp_path: Path, line: str):
    write_nccl(tmp_path, 3, Fault("missing", rank=1, seq=3))
    (tmp_path / "rank5.log").write_text(line * 3)
    result = fsdp("hang", "--json", str(tmp_path), timeout=60)
    assert "Traceback" not in result.err, result.err[-2000:]
    assert result.json()["culprit_ranks"] == [1]
