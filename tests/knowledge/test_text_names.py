"""Torch names in prose are found for verify; documentation URLs that contain them are not."""

from __future__ import annotations

from fsdp_skill import symbols


def test_prose_names_are_found_and_url_paths_are_not():
    text = (
        "See [DDP](https://docs.pytorch.org/docs/stable/generated/"
        "torch.nn.parallel.DistributedDataParallel.html): call\n"
        "torch.distributed.init_process_group first, then (torch.cuda.set_device).\n"
    )
    assert list(symbols.names_in_text(text)) == [
        (2, "torch.distributed.init_process_group"),
        (2, "torch.cuda.set_device"),
    ]


def test_a_name_after_a_dot_or_word_is_not_a_torch_name():
    assert list(symbols.names_in_text("mytorch.x and a.torch.y")) == []
