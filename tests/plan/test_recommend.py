"""The recommendation as an expert would give it: by step time with a memory margin, host
memory for offload, alternatives when only offload fits, and code that agrees with the
skill's pitfalls and lint."""

from __future__ import annotations

import pytest

from fsdp_skill.knowledge import pitfall, pitfalls
from fsdp_skill.lint import lint_source
from fsdp_skill.plan import cautions, evaluate, host, plan
from fsdp_skill.plan.planner import build_setup, load_model
from fsdp_skill.plan.snippet import render
from fsdp_skill.plan.strategies import Strategy, candidates


def _rows(result: dict) -> dict[str, dict]:
    return {r["name"]: r for r in result["strategies"]}


@pytest.fixture(autouse=True)
def _not_this_machine(monkeypatch):
    """Plans here are for other machines unless a test says otherwise."""
    monkeypatch.setattr(host, "local_memory_for", lambda gpus, nodes: None)


# --- case 1: 13B on 4 x 80 GB --------------------------------------------------------------


def test_13b_on_4x80gb_keeps_a_margin_instead_of_no_reshard_everywhere():
    result = plan(params="13b", gpus=4, gpu_memory="80GB")
    rec, rows = result["recommendation"], _rows(result)
    usable = result["setup"]["usable_gpu_memory"]
    # keeping every layer gathered fits at 97% of the budget: not with a margin
    thin = rows["fsdp2-no-reshard+ac"]
    assert thin["fits"] and not thin["fits_with_margin"]
    assert thin["per_gpu_bytes"]["total"] > 0.95 * usable
    assert rec["strategy"] == "fsdp2-full-shard+ac"
    chosen = rows[rec["strategy"]]
    assert chosen["per_gpu_bytes"]["total"] <= 0.95 * usable
    assert "fsdp2-no-reshard+ac" in rec["why"] and "margin" in rec["why"]
    assert "Trade-off:" in rec["why"] and "recomputation" in rec["why"]
    # every strategy carries its step time and the terms it is made of
    for row in rows.values():
        terms = row["step"]
        assert row["step_seconds"] == pytest.approx(
            terms["compute_seconds"] + terms["comm_exposed_seconds"] + terms["optimizer_seconds"],
            abs=2e-4,
        )
        assert row["tokens_per_second"] == pytest.approx(4 * 4096 / row["step_seconds"], rel=1e-3)
        assert terms["mfu"] == 0.4 and terms["peak_flops"] == 989e12


def test_the_pick_is_the_fastest_with_the_margin():
    for kwargs in (
        {"params": "13b", "gpus": 4, "gpu_memory": "80GB"},
        {"model": "llama-3-8b", "gpus": 16, "nodes": 2, "gpu_memory": "80GB"},
        {"model": "mixtral-8x7b", "gpus": 8, "gpu_memory": "80GB", "seq_len": 2048},
        {"model": "gpt2-xl", "gpus": 2, "gpu_memory": "24GB"},
    ):
        result = plan(**kwargs)
        chosen = result["recommendation"]["strategy"]
        qualified = [r for r in result["strategies"] if r["fits_with_margin"]]
        fastest = min(r["step_seconds"] for r in qualified)
        assert _rows(result)[chosen]["step_seconds"] <= fastest * (1 + evaluate.TIE), kwargs


def test_no_reshard_is_picked_only_when_it_pays_and_then_says_why():
    # across two nodes the backward re-gather crosses the slow link: keeping layers
    # gathered saves real time, so no-reshard wins, and the pitfall must be answered
    result = plan(model="llama-2-7b", gpus=16, nodes=2, gpu_memory="80GB", seq_len=2048)
    rec = result["recommendation"]
    if "no-reshard" in rec["strategy"]:
        assert "reshard-after-forward-false-everywhere" in rec["why"]
        assert [p["id"] for p in rec["pitfalls"]] == ["reshard-after-forward-false-everywhere"]
    # on one NVLink node it saves nothing, so the leaner full shard wins
    one = plan(model="llama-2-7b", gpus=8, gpu_memory="80GB")["recommendation"]
    assert "no-reshard" not in one["strategy"]


# --- case 2: 70B on 2 nodes x 8 H100, host memory -------------------------------------------


def test_70b_on_2x8_h100_says_host_memory_was_not_checked():
    result = plan(model="llama-3-70b", gpus=16, nodes=2, gpu_memory="80GB")
    rec, rows = result["recommendation"], _rows(result)
    assert rows[rec["strategy"]]["cpu_offload"]
    need = rows[rec["strategy"]]["cpu_bytes"]
    assert need > 1e12  # HSDP keeps a whole model's states on every node: over 1 TB
    assert rec["host_memory"] == {
        "needed_per_node": need,
        "available_per_node": None,
        "source": None,
        "checked": False,
    }
    assert "not checked" in rec["why"] and "--cpu-memory" in rec["why"]
    # the CPU optimizer step is a term of its own, and HSDP doubles it per rank
    hsdp, full = rows["fsdp2-hsdp+offload+ac"], rows["fsdp2-full-shard+offload+ac"]
    assert hsdp["step"]["optimizer_on"] == "cpu"
    assert hsdp["step"]["optimizer_seconds"] == pytest.approx(
        2 * full["step"]["optimizer_seconds"], rel=1e-3
    )
    # the pinned-memory pitfall is answered, not ignored
    assert "cpu-offload-pinned-host-memory" in rec["why"]
    assert "CPUOffloadPolicy()" in rec["snippet"] and "fused=True" in rec["snippet"]


def test_host_memory_given_decides_between_offload_strategies():
    common = dict(model="llama-3-70b", gpus=16, nodes=2, gpu_memory="80GB")
    roomy = plan(**common, cpu_memory="2TB")["recommendation"]
    assert roomy["host_memory"]["checked"] and roomy["strategy"] == "fsdp2-hsdp+offload+ac"
    # 700 GB holds full shard's half of the model states per node, not HSDP's whole
    tight = plan(**common, cpu_memory="700GB")
    assert tight["recommendation"]["strategy"] == "fsdp2-full-shard+offload+ac"
    assert not _rows(tight)["fsdp2-hsdp+offload+ac"]["fits"]
    assert plan(**common, cpu_memory="300GB")["recommendation"]["strategy"] is None


def test_a_plan_for_this_machine_reads_its_memory(monkeypatch):
    monkeypatch.setattr(host, "local_memory_for", lambda gpus, nodes: 512 * 10**9)
    result = plan(params="13b", gpus=1, gpu_memory="80GB")
    assert result["setup"]["cpu_memory"] == 512 * 10**9
    assert result["setup"]["cpu_memory_source"] == "local"
    rec = result["recommendation"]
    assert rec["host_memory"]["checked"] and rec["host_memory"]["source"] == "local"
    assert "on this machine" in rec["why"]


def test_local_memory_and_gpus_are_read_from_the_kernel(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       263852132 kB\nMemFree:        1 kB\n")
    assert host.memory_total(meminfo) == 263852132 * 1024
    assert host.memory_total(tmp_path / "missing") is None
    gpus, dev = tmp_path / "gpus", tmp_path / "dev"
    for name in ("0000:18:00.0", "0000:2a:00.0"):
        (gpus / name).mkdir(parents=True)
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (dev / name).touch()
    assert host.gpu_count(gpus, dev) == 2
    assert host.gpu_count(tmp_path / "none", tmp_path / "none") == 0


def test_local_memory_only_for_a_plan_of_this_machine(monkeypatch):
    monkeypatch.undo()  # the real local_memory_for
    monkeypatch.setattr(host, "gpu_count", lambda *a: 4)
    monkeypatch.setattr(host, "memory_total", lambda *a: 10**12)
    assert host.local_memory_for(4, 1) == 10**12
    assert host.local_memory_for(8, 1) is None  # more GPUs than it has
    assert host.local_memory_for(4, 2) is None  # other nodes


# --- case 3: only offload fits: alternatives, each planned again -----------------------------


def test_only_offload_fits_lists_what_else_would():
    common = dict(model="llama-3-70b", gpus=16, nodes=2, gpu_memory="80GB")
    rec = plan(**common)["recommendation"]
    found = {a["change"].split()[0]: a for a in rec["alternatives"]}
    assert set(found) == {"use", "a", "an", "LoRA"}, list(found)
    # more GPUs: the fewest that fit without offload, as a plan for them says
    more = found["use"]
    assert more["change"].startswith("use 24 GPUs (3 nodes x 8)")
    bigger = plan(model="llama-3-70b", gpus=24, nodes=3, gpu_memory="80GB")
    assert evaluate.pick(bigger["strategies"], offload=False)["name"] == more["strategy"]
    fewer = plan(model="llama-3-70b", gpus=16, nodes=2, gpu_memory="80GB")
    assert evaluate.pick(fewer["strategies"], offload=False) is None
    # the model states alone are too large for any sequence length
    assert found["a"]["strategy"] is None and "model states" in found["a"]["effect"]
    # 8-bit optimizer and LoRA, each the pick of a plan with that change
    for key, change in (("an", {"optimizer": "adamw8bit"}), ("LoRA", {"lora_rank": 16})):
        again = plan(**common, **change)
        best = evaluate.pick(again["strategies"], offload=False)
        assert best["name"] == found[key]["strategy"]
        assert best["step_seconds"] == found[key]["step_seconds"]
    assert "trainable parameters" in found["LoRA"]["change"]


def test_thin_margin_lists_faster_changes_and_a_roomy_pick_none():
    rec = plan(params="13b", gpus=4, gpu_memory="80GB")["recommendation"]
    assert rec["alternatives"]
    chosen = plan(params="13b", gpus=4, gpu_memory="80GB")
    pick = _rows(chosen)[rec["strategy"]]
    for alt in rec["alternatives"]:
        assert alt["tokens_per_second"] > pick["tokens_per_second"], alt
    roomy = plan(params="1b", gpus=8, gpu_memory="80GB")["recommendation"]
    assert roomy["alternatives"] == []


def test_micro_batch_alternative_is_the_largest_that_fits_without_offload():
    common = dict(model="llama-2-7b", gpus=8, gpu_memory="40GB", seq_len=4096)
    rec = plan(**common, micro_batch=8)["recommendation"]
    assert "offload" in rec["strategy"]
    alt = next(a for a in rec["alternatives"] if a["change"].startswith("micro-batch"))
    batch = int(alt["change"].split()[1])

    def without_offload(micro_batch):  # strategies that keep the margin on the GPU alone
        result = plan(**common, micro_batch=micro_batch)
        return [
            r["name"]
            for r in result["strategies"]
            if r["fits_with_margin"] and not r["cpu_offload"]
        ]

    assert alt["strategy"] in without_offload(batch)
    assert without_offload(batch + 1) == []


# --- consistency with the knowledge ----------------------------------------------------------


def _every_snippet():
    for source in ({"params": "7b"}, {"model": "gpt2"}, {"model": "mixtral-8x7b"}):
        spec, _ = load_model(**source)
        for extra in ({}, {"lora_rank": 16}, {"optimizer": "adamw8bit"}, {"precision": "fp16"}):
            setup = build_setup(spec, gpus=16, nodes=2, gpu_memory="80GB", **extra)
            for strategy in candidates(2):
                for version in ("2.13.0", "2.5.0", "2.3.0"):
                    yield setup, strategy, version, render(setup, strategy, version)


def test_every_snippet_passes_lint():
    for _setup, strategy, version, code in _every_snippet():
        result = lint_source(code, torch_version=version)
        assert not result["errors"], (strategy.name, version, result["errors"])
        assert not result["findings"], (strategy.name, version, result["findings"])


def test_each_pitfall_recognises_its_own_bad_code_and_not_its_good_code():
    checked = 0
    for p in pitfalls():
        if not cautions.bad_features(p):
            continue
        checked += 1
        assert p in cautions.matching(p.bad, None), p.id
        assert p not in cautions.matching(p.good, None), p.id
    assert checked >= 10


def test_snippets_touch_only_the_pitfalls_they_mean_to():
    spec, _ = load_model(params="7b")
    setup = build_setup(spec, gpus=16, nodes=2, gpu_memory="80GB")
    touched = {
        s.name: {p.id for p in cautions.matching(render(setup, s, "2.13.0"), "2.13.0")}
        for s in candidates(2)
    }
    for name, ids in touched.items():
        expected = set()
        if "no-reshard" in name:
            expected.add("reshard-after-forward-false-everywhere")
        if "offload" in name:
            expected.add("cpu-offload-pinned-host-memory")
        assert ids == expected, name


def test_a_recommendation_answers_every_pitfall_its_code_touches(monkeypatch):
    # force each strategy to be the pick, and read the recommendation it gets
    spec, _ = load_model(model="llama-2-7b")
    setup = build_setup(spec, gpus=16, nodes=2, gpu_memory="80GB")
    from fsdp_skill.plan import recommend

    rows, strategies = evaluate.rows_for(setup, "2.13.0")
    for row in rows:
        monkeypatch.setattr(evaluate, "pick", lambda rows, offload=True, _r=row: _r)
        rec = recommend.recommend(setup, rows, strategies, "2.13.0")
        touched = cautions.matching(rec["snippet"], "2.13.0")
        assert [p["id"] for p in rec["pitfalls"]] == [p.id for p in touched]
        for p in touched:
            assert p.id in rec["why"], (row["name"], p.id)
            assert pitfall(p.id) is not None


def test_offload_snippet_uses_the_fused_cpu_step_where_torch_has_it():
    spec, _ = load_model(params="7b")
    setup = build_setup(spec, gpus=8, gpu_memory="80GB")
    offload = Strategy("full-shard", offload=True)
    assert "fused=True" in render(setup, offload, "2.4.0")
    assert "fused=True" not in render(setup, offload, "2.3.1")  # FSDP1, CUDA-only fused
    assert "fused=True" not in render(setup, Strategy("full-shard"), "2.13.0")


def test_when_activations_alone_are_too_big_no_gpu_count_helps():
    rec = plan(model="llama-3-8b", gpus=1, gpu_memory="24GB", seq_len=131072)["recommendation"]
    assert rec["strategy"] is None
    more = next(a for a in rec["alternatives"] if a["change"] == "more GPUs")
    assert more["strategy"] is None and "activations alone" in more["effect"]
