"""Docstrings (reST and Google style) to Markdown."""

from __future__ import annotations

import inspect

from fsdp_skill.references.docstrings import inline, to_markdown


def _parses(code: str) -> bool:
    try:
        compile(code, "<doc>", "exec")
    except SyntaxError:
        return False
    return True


def _md(doc: str) -> str:
    return to_markdown(inspect.cleandoc(doc), _parses)


def test_inline_roles_and_literals():
    assert inline(":class:`~torch.distributed.fsdp.FSDPModule`") == "`FSDPModule`"
    assert inline(":func:`torch.distributed.new_group`") == "`torch.distributed.new_group`"
    assert inline(":ref:`the notes <ddp-notes>`") == "the notes"
    assert inline("use ``dist.barrier()`` here") == "use `dist.barrier()` here"
    assert (
        inline("`NCCL docs <https://example.org/nccl>`_") == "[NCCL docs](https://example.org/nccl)"
    )


def test_google_sections_become_labelled_lists():
    text = _md(
        """Make a group.

        Args:
            ranks (list[int]): ranks of the members. If ``None``,
                every rank.
            timeout (timedelta, optional): how long to wait.

        Returns:
            A handle to the group.
        """
    )
    assert "**Args:**" in text
    assert "- `ranks` (list[int]): ranks of the members. If `None`, every rank." in text
    assert "- `timeout` (timedelta, optional): how long to wait." in text
    assert "**Returns:**\n\nA handle to the group." in text


def test_admonitions_and_version_directives():
    text = _md(
        """Summary.

        .. warning::
            Groups must be created in the same order
            on every rank.

        .. versionadded:: 2.4
        """
    )
    assert "> **Warning:** Groups must be created in the same order\n> on every rank." in text
    assert "*Added in 2.4.*" in text


def test_doctest_that_parses_is_a_checked_python_block():
    text = _md(
        """Example::

            >>> # xdoctest: +SKIP
            >>> x = [1, 2]
            >>> y = sum(
            ...     x)
        """
    )
    assert "```python snippet\nx = [1, 2]\ny = sum(\n    x)\n```" in text
    assert "xdoctest" not in text


def test_code_that_does_not_parse_or_check_is_not_labelled_python():
    text = _md(
        """Use it like this::

            model = FSDP(model, <options>)

        Or the code-block:

        .. code-block:: python

            print("ok")
        """
    )
    assert "```text\nmodel = FSDP(model, <options>)\n```" in text
    assert "Use it like this:" in text
    assert '```python snippet\nprint("ok")\n```' in text
    rejected = to_markdown(">>> import torch.nope", lambda code: False)
    assert rejected.startswith("```pycon\n>>> import torch.nope")


def test_rest_field_lists():
    text = _md(
        """Do it.

        :param group: the process group
        :type group: ProcessGroup
        :returns: nothing
        """
    )
    assert "- `group`: the process group" in text
    assert "- `group` (type): ProcessGroup" in text
    assert "- return (returns): nothing" in text


def test_a_parameter_with_an_example_keeps_its_code():
    text = _md(
        """Wrap.

        Args:
            policy (Callable): decides what to wrap. Example::

                >>> def policy(module):
                >>>     return True

            other (int): more.
        """
    )
    assert "- `policy` (Callable): decides what to wrap. Example:" in text
    assert "```python snippet\ndef policy(module):\n    return True\n```" in text
    assert "- `other` (int): more." in text


def test_prose_names_point_at_what_exists():
    import types

    from fsdp_skill.references.api import Resolver

    torch = types.ModuleType("torch")
    torch.distributed = types.ModuleType("torch.distributed")
    torch.distributed.Store = type("Store", (), {})
    torch.distributed.wrap = types.ModuleType("torch.distributed.wrap")
    modules = {"torch": torch, "torch.distributed": torch.distributed}
    modules["torch.distributed.wrap"] = torch.distributed.wrap

    def importer(name):
        if name not in modules:
            raise ImportError(name)
        return modules[name]

    resolver = Resolver(importer)
    text = (
        "a (torch.distributed.store) in torch.distributed.wrap.py, torch.distributed.Nope\n"
        "```python snippet\nx = torch.distributed.store\n```"
    )
    fixed = resolver.fix_prose(text)
    assert fixed.split("\n")[0] == (
        "a (torch.distributed.Store) in torch/distributed/wrap.py, torch.distributed.Nope"
    )
    assert "x = torch.distributed.store" in fixed  # code is quoted, never rewritten
    assert resolver.checked("import torch.distributed\ntorch.distributed.Store()")
    assert not resolver.checked("import torch.distributed\ntorch.distributed.store()")


def test_markdown_fences_in_a_docstring_get_a_checked_tag():
    text = _md(
        """Enable it.

        ```python
        opts = make_options()
        ```
        Or in the shell:
        ```bash
        export NCCL_CTA_POLICY=2
        ```
        """
    )
    assert "```python snippet\nopts = make_options()\n```" in text
    assert "```bash\nexport NCCL_CTA_POLICY=2\n```" in text
    assert "Or in the shell:" in text


def test_an_admonition_written_with_one_colon_is_still_an_admonition():
    text = _md(
        """Save it.

        .. note:
            Rank 0 coordinates.

        .. warning ::
            Register it once.
        """
    )
    assert "> **Note:** Rank 0 coordinates." in text
    assert "> **Warning:** Register it once." in text


def test_code_in_an_admonition_stays_a_checked_block():
    text = _md(
        """Use RPC.

        .. note::
            Combine them.

            Example::

                >>> total = sum([1, 2])
        """
    )
    assert "> **Note:** Combine them." in text
    assert "\n```python snippet\ntotal = sum([1, 2])\n```" in text
