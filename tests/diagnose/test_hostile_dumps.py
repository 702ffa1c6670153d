"""Hostile flight-recorder dumps: refused fast, in bounded memory, one warning each, while
the other ranks' dumps are still analysed.

The pickles are written opcode by opcode (``tests.diagnose.hostile``); the JSON dumps are
written as text, since ``json.dumps`` would not write ``Infinity`` inside a valid dump or
nest a list 100,000 deep."""

from __future__ import annotations

import copy
import json
import pickle
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from fsdp_skill.diagnose import hang
from fsdp_skill.diagnose.safepickle import UnsafePickleError, loads_plain
from tests.diagnose import hostile
from tests.diagnose.synth import Fault, fr_dump, history

WORLD = 3
FAULT = Fault("missing", rank=2, seq=7)


def good_dumps(folder: Path) -> None:
    """Ranks 0 and 1 of a job where rank 2 never reached collective 7."""
    for rank in (0, 1):
        dump = fr_dump(rank, WORLD, history(rank, FAULT, 12))
        (folder / f"fr_rank{rank}").write_bytes(pickle.dumps(dump))


def rank2_dump() -> dict:
    return fr_dump(2, WORLD, history(2, FAULT, 12))


def run_limited(args: list[str], memory: int = 1 << 30, timeout: float = 60):
    """The real command line with an address-space limit: a runaway allocation fails fast
    instead of taking the machine."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "fsdp_skill", *args],
        capture_output=True,
        text=True,
        preexec_fn=limit,
        timeout=timeout,
    )
    return done, time.monotonic() - started


def test_billion_laughs_is_refused_at_once_in_little_memory():
    data = hostile.billion_laughs()
    assert len(data) == 472
    tracemalloc.start()
    started = time.perf_counter()
    with pytest.raises(UnsafePickleError, match="shared parts"):
        loads_plain(data)
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert elapsed < 0.5, f"{elapsed:.2f} s"
    assert peak < 1 << 20, f"{peak} bytes"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (hostile.self_containing_list(), "contains itself"),
        (hostile.deep_lists(100_000), "nested more than"),
        (hostile.many_gets(200_000), "more than 100000 objects"),
        (b"\x80\x04]\x94(h\x00h\x07e.", "memo entry 7 is not set"),
        (b"\x80\x04(\x8c\x01x.", "does not end with one object"),
        (b"\x80\x04a.", "stack underflow"),
        (b"\x80\x04\x8c\xffab", "cut short"),
        (b"\x80\x04\x97.", "opcode NEXT_BUFFER"),
    ],
    ids=["cycle", "deep", "many-uses", "bad-memo", "dangling-mark", "underflow", "cut", "buffer"],
)
def test_malformed_and_oversized_pickles_are_refused(data: bytes, reason: str):
    started = time.perf_counter()
    with pytest.raises(UnsafePickleError, match=reason):
        loads_plain(data, max_objects=100_000)
    assert time.perf_counter() - started < 2


def test_bounds_do_not_refuse_a_real_sized_dump():
    """2,000 entries with 40-frame stacks, the size a flight recorder is usually set to."""
    dump = fr_dump(0, WORLD, history(0, FAULT, 12), buffer=12)
    template = dump["entries"][0]
    frames = [
        {"name": f"f{i}", "filename": f"/venv/site-packages/torch/x{i}.py", "line": i}
        for i in range(40)
    ]
    dump["entries"] = [
        {**copy.deepcopy(template), "collective_seq_id": i, "frames": copy.deepcopy(frames)}
        for i in range(2000)
    ]
    assert loads_plain(pickle.dumps(dump)) == dump


def test_hostile_dump_beside_good_ones_is_one_warning(tmp_path: Path):
    good_dumps(tmp_path)
    (tmp_path / "fr_rank2").write_bytes(hostile.billion_laughs())
    done, elapsed = run_limited(["hang", "--json", str(tmp_path)])
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.returncode in (0, 1), done.stderr
    result = json.loads(done.stdout)
    assert result["ranks"] == 2
    assert any("fr_rank2" in w and "flight-recorder dump" in w for w in result["warnings"])
    assert elapsed < 30


def _json_dump(rank: int, entries: str, extra: str = "") -> str:
    return f'{{"version": "2.10", "rank": {rank}, "entries": {entries}{extra}}}'


def _entry(**fields) -> dict:
    entry = copy.deepcopy(rank2_dump()["entries"][-1])
    entry.update(fields)
    return entry


BAD_DUMPS = {
    "pg_status-list": lambda: {**rank2_dump(), "pg_status": [1, 2, 3]},
    "pg_status-bad-values": lambda: {
        **rank2_dump(),
        "pg_status": {"0": {"last_enqueued_collective": "many", "last_completed_collective": []}},
    },
    "seq-huge": lambda: {**rank2_dump(), "entries": [_entry(collective_seq_id=10**30)]},
    "seq-text": lambda: {**rank2_dump(), "entries": [_entry(collective_seq_id="seven")]},
    "seq-float": lambda: {**rank2_dump(), "entries": [_entry(collective_seq_id=1.5)]},
    "seq-bool": lambda: {**rank2_dump(), "entries": [_entry(collective_seq_id=True)]},
    "seq-far-apart": lambda: {
        **rank2_dump(),
        "entries": [_entry(collective_seq_id=1), _entry(collective_seq_id=10**15)],
    },
    "frames-int": lambda: {**rank2_dump(), "entries": [_entry(frames=5)]},
    "frames-of-junk": lambda: {**rank2_dump(), "entries": [_entry(frames=[1, None, {"line": []}])]},
    "sizes-junk": lambda: {**rank2_dump(), "entries": [_entry(input_sizes=[["a"], 5])]},
    "sizes-huge": lambda: {**rank2_dump(), "entries": [_entry(input_sizes=[[2**62, 2**62]])]},
    "name-list": lambda: {**rank2_dump(), "entries": [_entry(profiling_name=["x"] * 3)]},
    "group-int": lambda: {**rank2_dump(), "entries": [_entry(process_group=7)]},
    "entries-dict": lambda: {**rank2_dump(), "entries": {"a": 1}},
    "entry-list": lambda: {**rank2_dump(), "entries": [[1, 2]]},
    "rank-huge": lambda: {**rank2_dump(), "rank": 10**30},
    "not-a-dict": lambda: [1, 2, 3],
}


@pytest.mark.parametrize("name", sorted(BAD_DUMPS))
def test_malformed_pickled_dump_is_a_warning(tmp_path: Path, name: str):
    good_dumps(tmp_path)
    (tmp_path / "fr_rank2").write_bytes(pickle.dumps(BAD_DUMPS[name]()))
    result = hang([str(tmp_path)])
    assert {0, 1} <= set(map(int, result["rank_states"]))
    assert any("fr_rank2" in w for w in result["warnings"]), result["warnings"]


JSON_DUMPS = {
    "infinity-size": _json_dump(
        2,
        '[{"collective_seq_id": 1, "profiling_name": "nccl:all_reduce", '
        '"input_sizes": [[Infinity]]}]',
    ),
    "nan-seq": _json_dump(2, '[{"collective_seq_id": NaN, "profiling_name": "x"}]'),
    "overflowing-float": _json_dump(
        2, '[{"collective_seq_id": 1e400, "profiling_name": "nccl:all_reduce"}]'
    ),
    "deeply-nested": _json_dump(2, "[" * 100_000 + "]" * 100_000),
    "huge-int": _json_dump(2, '[{"collective_seq_id": 1' + "0" * 5000 + "}]"),
    "pg-status-list": _json_dump(2, "[]", ', "pg_status": [1, 2]'),
    "truncated": _json_dump(2, '[{"collective_seq_id": 1, "profiling_name"')[:-1],
}


@pytest.mark.parametrize("name", sorted(JSON_DUMPS))
def test_malformed_json_dump_is_a_warning(tmp_path: Path, name: str):
    good_dumps(tmp_path)
    (tmp_path / "fr_rank2.json").write_text(JSON_DUMPS[name])
    result = hang([str(tmp_path)])
    assert {0, 1} <= set(map(int, result["rank_states"]))
    assert any("fr_rank2.json" in w for w in result["warnings"]), result["warnings"]


def test_malformed_dumps_through_the_command_line(tmp_path: Path):
    """All of them at once, beside the good dumps: no traceback, the good ranks analysed."""
    good_dumps(tmp_path)
    for name, make in BAD_DUMPS.items():
        (tmp_path / f"bad_{name}_rank2").write_bytes(pickle.dumps(make()))
    for name, text in JSON_DUMPS.items():
        (tmp_path / f"bad_{name}_rank2.json").write_text(text)
    done, _ = run_limited(["hang", "--json", str(tmp_path)], timeout=120)
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert {0, 1} <= set(map(int, result["rank_states"]))
    flagged = {Path(w.split(":")[0]).name for w in result["warnings"] if "bad_" in w}
    assert len(flagged) >= len(BAD_DUMPS) + len(JSON_DUMPS) - 2  # a few are partly readable
