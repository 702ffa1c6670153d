"""What Hugging Face Trainer does that the guides state, checked in the installed transformers.

checkpointing says which processes write with ``save_on_each_node``; migrate-ddp-to-fsdp that
the loss Trainer logs is already the mean over the processes.
"""

from __future__ import annotations

import inspect

import pytest

transformers = pytest.importorskip("transformers")


def test_trainer_saves_on_each_node_from_its_first_process():
    """checkpointing: save_on_each_node makes local process 0 of every node a writer."""
    source = inspect.getsource(transformers.TrainingArguments.should_save.fget)
    on_each, otherwise = source.split("else:", 1)
    assert "self.save_on_each_node" in on_each and "local_process_index == 0" in on_each
    assert "process_index == 0" in otherwise and "local_process_index" not in otherwise


def test_trainer_logs_the_loss_averaged_over_the_processes():
    """migrate-ddp-to-fsdp: 'Trainer logs the mean over the processes already'."""
    source = inspect.getsource(transformers.Trainer._maybe_log_save_evaluate)
    assert "nested_gather(tr_loss" in source and ").mean()" in source
