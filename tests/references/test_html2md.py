"""Markdown from the real docs and tutorials markup (fixtures/site, cut from the built sites)."""

from __future__ import annotations

import re

import pytest

from fsdp_skill import markdown
from fsdp_skill.references import html2md, html_tables
from fsdp_skill.references.html_tree import parse, text_of, walk
from tests.references.docs_server import SITE

DOCS = "https://docs.pytorch.org/docs/2.11/"
TUTORIALS = "https://docs.pytorch.org/tutorials/"
PAGES = {
    "docs/2.11/distributed.html": DOCS + "distributed.html",
    "docs/2.11/distributed.fsdp.fully_shard.html": DOCS + "distributed.fsdp.fully_shard.html",
    "docs/2.11/elastic/run.html": DOCS + "elastic/run.html",
    "docs/2.11/fsdp.html": DOCS + "fsdp.html",
    "tutorials/intermediate/FSDP_tutorial.html": TUTORIALS + "intermediate/FSDP_tutorial.html",
    "old-theme/tutorials/intermediate/FSDP_tutorial.html": TUTORIALS
    + "intermediate/FSDP_tutorial.html",
}
SECTION_LIMIT = 8000


def _convert(name: str) -> html2md.Converted:
    return html2md.convert((SITE / name).read_text(encoding="utf-8"), PAGES[name])


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return {name: _convert(name).markdown for name in PAGES}


@pytest.mark.parametrize("name", PAGES)
def test_every_code_block_is_kept_byte_for_byte(name):
    root = parse((SITE / name).read_text(encoding="utf-8"))
    text = _convert(name).markdown
    blocks = [b.code for b in markdown.code_blocks(text)]
    for pre in (n for n in walk(root) if n.tag == "pre"):
        code = text_of(pre).lstrip("\n").removesuffix("\n") + "\n"
        assert code in blocks, code[:80]


def test_blank_lines_inside_code_are_never_collapsed(pages):
    run = pages["docs/2.11/elastic/run.html"]
    assert "    train()\n\n\ndef train():\n" in run
    assert "        train_step(batch)\n\n        if should_checkpoint:" in run
    old = pages["old-theme/tutorials/intermediate/FSDP_tutorial.html"]
    assert "import datasets, transforms\n\n\nfrom torch.optim.lr_scheduler" in old


def test_fence_languages_follow_the_code(pages):
    run = pages["docs/2.11/elastic/run.html"]
    assert "```bash\ntorchrun\n    --standalone\n    --nnodes=1\n" in run  # highlight-default
    assert "```bash\ntorchrun --numa-binding=node --nproc-per-node=8 train.py\n```" in run
    assert "```pycon\n>>> import argparse\n" in run
    assert "```python snippet\nlocal_rank = int(os.environ[" in run
    fsdp = pages["docs/2.11/fsdp.html"]
    assert "```pycon\n>>> import torch\n>>> from torch.distributed.fsdp import" in fsdp
    tutorial = pages["tutorials/intermediate/FSDP_tutorial.html"]
    assert (
        "```python snippet\nfrom torch.distributed.fsdp import fully_shard, FSDPModule" in tutorial
    )


def test_shell_prompts_make_a_console_block():
    # the classification itself: Sphinx marks prompted shell sessions as highlight-console,
    # and leaves $-prompted literal blocks in highlight-default (Python that does not parse)
    assert html2md.code_language("$ torchrun --nproc-per-node=2 train.py\n", "python") == "console"
    assert html2md.code_language("$ pip install torch\n", "console") == "console"
    assert html2md.code_language("$ pip install torch\n", "bash") == "console"
    assert html2md.code_language("export NCCL_DEBUG=INFO\n", "bash") == "bash"
    assert html2md.code_language("RuntimeError: NCCL error\n", "python") == "text"


def test_the_backends_table_puts_every_cell_under_its_own_header(pages):
    text = pages["docs/2.11/distributed.html"]
    header = "| Backend Device | `gloo` CPU | `gloo` GPU | `mpi` CPU | `mpi` GPU | `nccl` CPU |"
    assert header in text
    rows = [ln for ln in text.split("\n") if ln.startswith("| ")]
    assert len(rows) == 12 and all(row.count(" | ") == 8 for row in rows)
    assert "| reduce_scatter | ✓ | ✓ | ✘ | ✘ | ✘ | ✓ | ✘ | ✓ |" in rows
    assert "| all_to_all | ✘ | ✘ | ✓ | ? | ✘ | ✓ | ✘ | ✓ |" in rows


def test_row_spans_repeat_down_and_header_rows_merge():
    # constructed to the shape docutils writes for a grid table with a row span
    table = parse(
        "<table><thead><tr><th rowspan='2'>Op</th><th colspan='2'>gloo</th></tr>"
        "<tr><th>CPU</th><th>GPU</th></tr></thead><tbody>"
        "<tr><td rowspan='2'>all_reduce</td><td>yes</td><td>yes</td></tr>"
        "<tr><td colspan='2'>no</td></tr></tbody></table>"
    ).elements()[0]
    header, body = html_tables.grid(table, lambda cell: text_of(cell).strip())
    assert header == ["Op", "gloo CPU", "gloo GPU"]
    assert body == [["all_reduce", "yes", "yes"], ["all_reduce", "no", "no"]]


def test_signatures_keep_star_and_parameter_types_are_plain_text(pages):
    text = pages["docs/2.11/distributed.fsdp.fully_shard.html"]
    assert "```text\ntorch.distributed.fsdp.fully_shard(module, *, mesh=None, " in text
    assert "cast_forward_inputs=True), offload_policy=OffloadPolicy(), ignored_params=None)" in text
    assert "set_all_reduce_hook(hook, *, stream=None)\n```" in text
    assert "class torch.distributed.fsdp.FSDPModule(*args, **kwargs)" in text
    assert "- **reshard_after_forward** (Optional[Union[bool, int]]) –" in text
    assert "(Optional[Callable[[nn.Parameter], Optional[Shard]]])" in text
    assert "- **ignored_params** (set[nn.Parameter] | None) –" in text
    assert "- **mp_policy** (MixedPrecisionPolicy) –" in text
    assert "*[*" not in text and "**[**" not in text and "[source]" not in text


def test_numbering_prose_brackets_and_cite(pages):
    run = pages["docs/2.11/elastic/run.html"]
    assert "\n9. `rdzv_backend` - The backend of the rendezvous" in run  # <ol start="9">
    assert "\n3. In your training program, you can either use" in run
    assert "\n4. On failures or membership changes ALL surviving workers" in run
    assert "in form \\<host\\>[:\\<port\\>] (e.g. node1.example.com:29400)" in run
    assert "usually in form `<host>:<port>`." in run  # code keeps its brackets
    assert "The `sys.executable` is used by default." in run
    fully_shard = pages["docs/2.11/distributed.fsdp.fully_shard.html"]
    assert "See `Comm` and `ReduceScatter` for details." in fully_shard
    tutorial = pages["tutorials/intermediate/FSDP_tutorial.html"]
    assert "DTensor placements are `Shard(dim=0)`." in tutorial
    assert (
        "archived in [\\[1\\]](https://docs.pytorch.org/tutorials/intermediate/FSDP1_tutorial.html)"
        in tutorial
    )


def test_figures_keep_their_alt_text(pages):
    tutorial = pages["tutorials/intermediate/FSDP_tutorial.html"]
    assert f"![FSDP workflow]({TUTORIALS}_images/fsdp_workflow.png)" in tutorial
    assert f"![FSDP Implicit]({TUTORIALS}_images/fsdp_implicit.png)" in tutorial
    old = pages["old-theme/tutorials/intermediate/FSDP_tutorial.html"]
    assert f"![FSDP workflow]({TUTORIALS}_images/fsdp_workflow.png)\n\nFSDP Workflow\n" in old


RESIDUE = (
    "Created On",
    "Last Updated",
    "Run in Google Colab",
    "Download Notebook",
    "View on GitHub",
    "Rate this Page",
    "★",
    "Send Feedback",
    "Section Navigation",
    "Shortcuts",
    "Reference API",
    "torch.utils.benchmark",
    "Unstable feature",
    "¶",
    "[source]",
)


@pytest.mark.parametrize("name", PAGES)
def test_theme_residue_is_removed_and_the_page_opens_with_its_title(name, pages):
    text = pages[name]
    assert [r for r in RESIDUE if r in text] == []
    assert "\nintermediate/FSDP_tutorial\n" not in text  # the tutorials' type label
    title = _convert(name).title
    assert text.startswith(f"# {title}\n")
    assert len(re.findall(f"^# {re.escape(title)}$", text, re.MULTILINE)) == 1


def test_api_entries_nest_under_their_section_and_class(pages):
    heads = [
        (level, title)
        for _, level, title in markdown.headings(
            pages["docs/2.11/distributed.fsdp.fully_shard.html"]
        )
    ]
    assert (2, "PyTorch FSDP2 (`fully_shard`)") in heads
    assert (3, "torch.distributed.fsdp.fully_shard") in heads
    assert (3, "torch.distributed.fsdp.FSDPModule") in heads
    assert (4, "torch.distributed.fsdp.FSDPModule.reshard") in heads
    assert (4, "torch.distributed.fsdp.FSDPModule.set_modules_to_backward_prefetch") in heads
    fsdp = [(lv, t) for _, lv, t in markdown.headings(pages["docs/2.11/fsdp.html"])]
    assert (2, "torch.distributed.fsdp.FullyShardedDataParallel") in fsdp  # right under h1


def test_a_long_entry_gets_its_field_lists_as_sub_headings(pages):
    fsdp = pages["docs/2.11/fsdp.html"]  # the FSDP1 class: description and 11 parameters
    entry = "torch.distributed.fsdp.FullyShardedDataParallel"
    assert f"### FullyShardedDataParallel: Parameters\n\n<{DOCS}fsdp.html#{entry}>\n" in fsdp
    assert "**Parameters:**" not in fsdp
    short = pages["docs/2.11/distributed.fsdp.fully_shard.html"]
    assert "**Parameters:**" in short and ": Parameters" not in short  # short entries: no


@pytest.mark.parametrize("name", PAGES)
def test_no_part_between_two_headings_is_over_the_section_limit(name, pages):
    lines = pages[name].split("\n")
    starts = [n - 1 for n, _, _ in markdown.headings(pages[name])] + [len(lines)]
    sizes = [len("\n".join(lines[a:b])) for a, b in zip(starts, starts[1:], strict=False)]
    assert max(sizes) <= SECTION_LIMIT


def test_every_heading_links_to_its_own_anchor(pages):
    run = pages["docs/2.11/elastic/run.html"]
    assert f"## Usage\n\n<{DOCS}elastic/run.html#usage>\n" in run
    anchors = re.findall(r"^#{2,6} .+\n\n<([^>]+)>$", run, re.MULTILINE)
    assert len(anchors) == len([h for h in markdown.headings(run) if h[1] > 1])
    assert all(re.fullmatch(re.escape(DOCS) + r"elastic/run\.html#[\w.-]+", a) for a in anchors)
    api = pages["docs/2.11/distributed.fsdp.fully_shard.html"]
    reshard = "torch.distributed.fsdp.FSDPModule.reshard"
    assert f"#### {reshard}\n\n<{DOCS}distributed.fsdp.fully_shard.html#{reshard}>\n" in api
    old = pages["old-theme/tutorials/intermediate/FSDP_tutorial.html"]
    assert (
        f"## How FSDP works\n\n<{TUTORIALS}intermediate/FSDP_tutorial.html#how-fsdp-works>" in old
    )


def test_sloppy_and_hostile_html_converts_without_crashing():
    sloppy = "<main><h2>Steps</h2><p>one<p>two<ul><li>a<li>b</ul><table><tr><td>x<td>y</table>"
    text = html2md.convert(sloppy, "https://example.org/docs/x.html").markdown
    assert "one\n\ntwo" in text and "- a\n- b" in text and "| x | y |" in text
    deep = "<main>" + "<div>" * 5000 + "<p>bottom</p>" + "</div>" * 5000 + "</main>"
    assert "bottom" in html2md.convert(deep, "https://example.org/docs/x.html").markdown
    wide = "<main><table><tr><td colspan='999999'>x</td></tr></table></main>"
    assert html2md.convert(wide, "https://example.org/x.html").markdown.count("x") <= 100


def test_api_entries_of_older_sphinx_builds_are_entries_too():
    # constructed to the shape Sphinx 3 wrote (the docs of torch 1.x): dl.function, no dl.py
    old = (
        '<div role="main"><div class="section" id="x"><h1>T</h1><dl class="function">'
        '<dt id="torch.distributed.barrier"><code class="sig-prename descclassname">'
        'torch.distributed.</code><code class="sig-name descname">barrier</code>'
        '<span class="sig-paren">(</span><em class="sig-param">group=None</em>'
        '<span class="sig-paren">)</span></dt><dd><p>Sync.</p></dd></dl></div></div>'
    )
    text = html2md.convert(old, "https://docs.pytorch.org/docs/1.13/distributed.html").markdown
    assert "## torch.distributed.barrier\n" in text
    assert "```text\ntorch.distributed.barrier(group=None)\n```" in text


def test_a_positional_only_slash_is_kept_in_the_signature():
    # the fully_shard fixture's keyword-only marker, with "/" where it has "*": Sphinx writes
    # both as a bare operator parameter
    page = (SITE / "docs/2.11/distributed.fsdp.fully_shard.html").read_text(encoding="utf-8")
    star = '<em class="sig-param"><span class="o"><span class="pre">*</span></span></em>'
    assert star in page
    slashed = page.replace(star, star.replace(">*<", ">/<"), 1)
    text = html2md.convert(slashed, PAGES["docs/2.11/distributed.fsdp.fully_shard.html"]).markdown
    assert "torch.distributed.fsdp.fully_shard(module, /, mesh=None, " in text
