"""Message formats of several torch and NCCL releases, as published in bug reports."""

from __future__ import annotations

from fsdp_skill.diagnose import hang


def _write(tmp_path, lines: list[str]) -> str:
    path = tmp_path / "job.log"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_watchdog_lines_of_three_torch_generations(tmp_path):
    """torch 1.x (no element counts), 2.x with "[rankN]:" prefixes, and "PG ID ... PG GUID"."""
    lines = [
        "[E ProcessGroupNCCL.cpp:737] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 "
        "milliseconds before timing out.",
        "[rank1]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.",
        "[rank2]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [PG ID 0 PG GUID "
        "0(default_pg) Rank 2] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
        "ran for 600020 milliseconds before timing out.",
        "[rank3]:[E626 06:24:44.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID "
        "0(default_pg) Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=469507, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, "
        "NumelOut=68124672, Timeout(ms)=600000) ran for 600099 milliseconds before timing out.",
        "[rank3]:[E626 06:24:44.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID "
        "0(default_pg) Rank 3] Exception (either an error or timeout) detected by watchdog at "
        "work: 469507, last enqueued NCCL work: 469507, last completed NCCL work: 469506.",
    ]
    result = hang([_write(tmp_path, lines)])
    assert result["ranks"] == 4
    assert (result["verdict"], result["culprit_ranks"]) == ("missing-collective", [3])
    d = result["first_divergence"]
    assert (d["seq"], d["op"]) == (469508, "ALLREDUCE")
    assert result["rank_states"]["3"]["waiting_in"]["op"] == "REDUCESCATTER"
    assert result["rank_states"]["3"]["last_enqueued"] == {"default": 469507}


def test_nccl_coll_lines_with_launcher_prefixes(tmp_path):
    """COLL lines behind a launcher's own prefix, two ranks in one process's output."""

    def coll(rank: int, op: str, seq: int, count: int) -> str:
        return (
            f"(RayTrainWorker pid=61{rank}, ip=10.72.7.{rank}) host{rank}:61{rank}:189{rank} "
            f"[{rank}] NCCL INFO {op}: opCount {seq:x} sendbuff 0x78d056200000 recvbuff "
            f"0x78d056200000 count {count} datatype 7 op 0 root 0 comm 0x78cfda04584{rank} "
            f"[nranks=3] stream 0x78d07125e5e0"
        )

    lines = []
    for rank in range(3):
        lines.append(
            f"host{rank}:61{rank}:189{rank} [{rank}] NCCL INFO comm 0x78cfda04584{rank} rank "
            f"{rank} nranks 3 cudaDev {rank} busId {rank}000 - Init COMPLETE"
        )
    for seq in range(0x139A, 0x13A0):
        for rank in range(3):
            count = 7066572 if (rank == 2 and seq == 0x139E) else 7382228
            lines.append(coll(rank, "AllReduce", seq, count))
    result = hang([_write(tmp_path, lines)])
    assert (result["verdict"], result["culprit_ranks"]) == ("size-mismatch", [2])
    assert result["first_divergence"]["seq"] == 0x139E


def test_all_waiting_across_formats(tmp_path):
    """One rank's log leaves out the element count: still the same collective."""
    lines = [
        "[E ProcessGroupNCCL.cpp:737] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=77, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 "
        "milliseconds before timing out.",
    ] + [
        f"[rank{r}]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog "
        "caught collective operation timeout: WorkNCCL(SeqNum=77, OpType=ALLREDUCE, "
        "NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600061 milliseconds before timing out."
        for r in (1, 2)
    ]
    result = hang([_write(tmp_path, lines)])
    assert (result["verdict"], result["culprit_ranks"]) == ("all-waiting", [])
    assert result["first_divergence"]["majority"]["ranks"] == [0, 1, 2]
    assert result["first_divergence"]["numel"] == "8"


def test_sub_communicators_are_separate_process_groups(tmp_path):
    """Each rank logs a world communicator and a 2-rank one (as HSDP or a new_group creates);
    rank 1 skips a collective of its pair group only."""
    for rank in range(4):
        host, pid = f"node{rank}", 700 + rank
        pair = "0x00000000000a11aa" if rank < 2 else "0x00000000000b22bb"
        world_ptr, pair_ptr = f"0x5500000{rank}", f"0x6600000{rank}"
        lines = [
            f"{host}:{pid}:{pid} [{rank}] NCCL INFO comm {world_ptr} rank {rank} nranks 4 "
            f"cudaDev {rank} busId {rank}000 commId 0x00000000000ffff0 - Init COMPLETE",
            f"{host}:{pid}:{pid} [{rank}] NCCL INFO comm {pair_ptr} rank {rank % 2} nranks 2 "
            f"cudaDev {rank} busId {rank}000 commId {pair} - Init COMPLETE",
        ]
        pair_ops = 5 if rank == 1 else 6
        for seq in range(8):
            for ptr, limit, nranks in ((world_ptr, 8, 4), (pair_ptr, pair_ops, 2)):
                if seq < limit:
                    lines.append(
                        f"{host}:{pid}:{pid + 1} [{rank}] NCCL INFO AllGather: opCount {seq:x} "
                        f"sendbuff 0x1 recvbuff 0x2 count 64 datatype 9 op 0 root 0 comm {ptr} "
                        f"[nranks={nranks}] stream 0x3"
                    )
        (tmp_path / f"rank{rank}.log").write_text("\n".join(lines) + "\n")
    result = hang([str(tmp_path)])
    assert (result["verdict"], result["culprit_ranks"]) == ("missing-collective", [1])
    d = result["first_divergence"]
    assert d["process_group"] == "nccl:0x00000000000a11aa [NCCL COLL]"
    assert (d["seq"], d["majority"]["ranks"]) == (5, [0])
