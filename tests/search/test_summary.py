"""Less reading per answer: result summaries, linked pitfalls, plain text on a terminal."""

from __future__ import annotations

from fsdp_skill.search import search, show, summary
from tests.cli import fsdp

RELATED = (
    "\n## Related pitfalls\n\n"
    "- [collective-order-mismatch](pitfalls.md#collective-order-mismatch)\n"
    "- [full-state-dict-oom](pitfalls.md#full-state-dict-oom)\n"
    "- [no-such-pitfall](pitfalls.md#no-such-pitfall)\n"
)


def test_plain_drops_markers_pipes_and_link_targets():
    cell = "| `Join([model])` | **wrap** the loop | |---|---| | FSDP2 | see [uneven](uneven.md) |"
    assert summary.plain(cell) == "`Join([model])` · wrap the loop · FSDP2 · see uneven"
    table = "| a | b |\n|---|:--:|\n| 1 | 2 |\n"
    assert summary.plain(table) == "a · b; 1 · 2"
    assert summary.plain("## Title\n\ncall `super().__init__()` *first*") == (
        "Title call `super().__init__()` first"
    )
    assert summary.plain("8*3090 GPUs") == "8*3090 GPUs"


def test_first_sentences_stop_at_the_limit():
    text = "One thing. Two things here. " + "Three " * 100
    assert summary.first_sentences(text, 30) == "One thing. Two things here."
    assert summary.first_sentences("word " * 100, 20).endswith("…")


def test_summaries_say_what_each_kind_of_section_says(bundle):
    results = {r["id"]: r for r in search("hang watchdog timeout", k=10, bundle=bundle)["results"]}
    pitfall = results["pitfall:collective-order-mismatch"]["summary"]
    assert pitfall.startswith("Training hangs forever until the NCCL watchdog timeout fires.")
    assert "Fix: Make every rank run the same collectives." in pitfall
    env = search("NCCL_SOCKET_IFNAME", k=1, bundle=bundle)["results"][0]
    assert env["summary"] == "Values: eth0, ^lo. Several NICs."
    guide = search("meshes for HSDP", k=1, bundle=bundle)["results"][0]
    assert guide["summary"].startswith("Build a 2-D mesh with `init_device_mesh(")


def test_show_with_pitfalls_lists_what_the_page_links(bundle):
    page = bundle / "references" / "fsdp2.md"
    page.write_text(page.read_text() + RELATED)
    shown = show("fsdp2#meshes-for-hsdp", bundle=bundle, with_pitfalls=True)
    assert [p["id"] for p in shown["pitfalls"]] == [
        "pitfall:collective-order-mismatch",
        "pitfall:full-state-dict-oom",
    ]  # a link to a pitfall the bundle lacks is left out
    first = shown["pitfalls"][0]
    assert first["title"] == "Ranks hang in a collective"
    assert first["summary"] == (
        "Ranks hang in a collective. Fix: Make every rank run the same collectives."
    )
    assert "pitfalls" not in show("fsdp2#meshes-for-hsdp", bundle=bundle)
    alone = show("pitfall:collective-order-mismatch", bundle=bundle, with_pitfalls=True)
    assert alone["pitfalls"] == []  # a pitfall does not list itself or its page's index


def test_terminal_output_is_plain_and_json_keeps_the_highlights(bundle):
    page = bundle / "references" / "fsdp2.md"
    page.write_text(page.read_text() + RELATED)
    env = {"FSDP_SKILL_BUNDLE": str(bundle)}
    shown = fsdp("search", "reshard", "after", "forward", "-k", "3", env=env)
    assert shown.code == 0, shown.err
    assert "**" not in shown.out and "|" not in shown.out
    found = fsdp("search", "reshard", "after", "forward", "--json", env=env).json()
    assert "**" in found["results"][0]["snippet"] and found["results"][0]["summary"]
    linked = fsdp("show", "fsdp2#meshes-for-hsdp", "--with-pitfalls", env=env)
    assert linked.code == 0, linked.err
    assert "- pitfall:collective-order-mismatch: Ranks hang in a collective. Fix:" in linked.out
    as_json = fsdp("show", "fsdp2#meshes-for-hsdp", "--with-pitfalls", "--json", env=env).json()
    assert as_json["pitfalls"][1]["id"] == "pitfall:full-state-dict-oom"
