"""What Hugging Face Trainer does that the guides state, checked in the installed transformers.

checkpointing says which processes write with ``save_on_each_node``; migrate-ddp-to-fsdp that
the loss Trainer logs is already the mean over the processes; process-groups which timeout the
Trainer and Accelerate give the process group; dataparallel-instead-of-ddp that a Trainer on
several GPUs without a launcher uses nn.DataParallel; checkpointing how a resumed run finds
its place in the data.
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


def test_a_trainer_run_as_one_process_on_several_gpus_wraps_in_dataparallel():
    """dataparallel-instead-of-ddp: n_gpu > 1 without a launcher means nn.DataParallel, and
    torch's docstring recommends DDP over it."""
    import torch.nn as nn

    source = inspect.getsource(transformers.Trainer._wrap_model)
    assert "self.args.n_gpu > 1" in source and "model = nn.DataParallel(model)" in source
    assert "It is recommended to use :class:`~torch.nn.parallel.DistributedDataParallel`" in (
        nn.DataParallel.__doc__
    )


def test_a_resumed_trainer_skips_the_batches_already_seen_unless_told_not_to():
    """checkpointing (resume mid-epoch): Trainer's skip, and its switch off."""
    source = inspect.getsource(transformers.Trainer._run_epoch)
    assert "steps_trained_in_current_epoch > 0 and not self.args.ignore_data_skip" in source
    assert "skip_first_batches(train_dataloader, steps_trained_in_current_epoch)" in source
    assert transformers.TrainingArguments(output_dir="out").ignore_data_skip is False


def test_accelerate_saves_a_loaders_position_only_when_it_is_stateful():
    """checkpointing (resume mid-epoch): save_state writes the loader's state only with
    use_stateful_dataloader (default False); skip_first_batches is the way otherwise."""
    pytest.importorskip("accelerate")
    from accelerate import Accelerator
    from accelerate.checkpointing import save_accelerator_state
    from accelerate.utils import DataLoaderConfiguration

    source = inspect.getsource(save_accelerator_state)
    written = source[source.index('if getattr(dataloader, "use_stateful_dataloader", False):') :]
    assert "dataloader.state_dict()" in written.split("logger.info")[0]
    assert DataLoaderConfiguration().use_stateful_dataloader is False
    assert callable(Accelerator.skip_first_batches)


TIMEOUT_PROBE = """
import os
import sys
import tempfile

import torch.distributed as dist
import torch
from transformers import TrainingArguments

kwargs = {"ddp_timeout": int(sys.argv[1])} if sys.argv[1] != "default" else {}
args = TrainingArguments(output_dir=tempfile.mkdtemp(), use_cpu=sys.argv[2] == "use_cpu", **kwargs)
args.device  # sets up the distributed state: init_process_group
group = dist.distributed_c10d._get_default_group()
if dist.get_rank() == 0:
    print("TIMEOUT", group._get_backend(torch.device("cpu")).options._timeout, flush=True)
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_the_trainers_ddp_timeout_is_the_process_groups_timeout(tmp_path):
    """process-groups: TrainingArguments(ddp_timeout=...) (seconds, default 1800) is the
    timeout the Trainer's init_process_group gets, except with use_cpu=True, where
    transformers 5.24 leaves torch's default (a CPU-only machine without use_cpu takes the
    path a GPU run takes)."""
    from datetime import timedelta

    from tests.distributed import run_script

    field = transformers.TrainingArguments.__dataclass_fields__["ddp_timeout"]
    assert field.default == 1800
    cases = (
        ("77", "devices", timedelta(seconds=77)),
        ("default", "devices", timedelta(seconds=1800)),
        ("77", "use_cpu", timedelta(minutes=30)),  # Gloo's own default: ddp_timeout unused
    )
    for timeout, where, expected in cases:
        run = run_script(tmp_path, "probe.py", TIMEOUT_PROBE, 2, [timeout, where], 180, check=True)
        assert f"TIMEOUT {expected}" in run.stdout, (timeout, where, run.stdout[-2000:])


def test_accelerate_defaults_the_nccl_timeout_to_ten_minutes_and_others_to_thirty():
    """process-groups: InitProcessGroupKwargs without a timeout keeps torch's defaults."""
    from accelerate import InitProcessGroupKwargs

    assert InitProcessGroupKwargs(backend="nccl").timeout.total_seconds() == 600
    assert InitProcessGroupKwargs(backend="gloo").timeout.total_seconds() == 1800


def test_the_trainer_logs_the_global_batch_as_micro_batch_times_accumulation_times_ranks():
    """migrate-ddp-to-fsdp: the Trainer's "Total train batch size" is the global batch."""
    source = inspect.getsource(transformers.Trainer)
    assert "Total train batch size (w. parallel, distributed & accumulation)" in source
    total = inspect.getsource(transformers.Trainer.get_total_train_batch_size)
    assert "micro_batch * grad_accum * dp_world_size" in total


def test_the_trainer_averages_the_loss_over_every_processs_label_tokens():
    """migrate-ddp-to-fsdp (token losses on ranks with different token counts): the Trainer
    counts the label tokens of a step's micro-batches and, with average_tokens_across_devices
    (default True), sums the count over the processes and multiplies the loss by their
    number, undoing DDP's mean."""
    field = transformers.TrainingArguments.__dataclass_fields__["average_tokens_across_devices"]
    assert field.default is True
    counting = inspect.getsource(transformers.Trainer._get_num_items_in_batch)
    assert "for batch in batch_samples" in counting  # every micro-batch of the step
    assert "labels.ne(-100).sum()" in counting
    assert "self.accelerator.gather(num_items_in_batch.to(device)).sum()" in counting
    loss = inspect.getsource(transformers.Trainer.compute_loss)
    assert "loss_scale = self.accelerator.num_processes" in loss and "loss *= loss_scale" in loss


def test_the_trainer_refuses_save_only_model_with_sharded_fsdp_checkpoints_or_the_best_model():
    """trainer-fsdp, 'save_only_model under FSDP': the two refusals the section quotes, and
    the conditions that raise them, in the installed transformers."""
    from tests.knowledge.texts import section

    source = inspect.getsource(transformers.Trainer.create_accelerator_and_postprocess)
    sharded = (
        "save_only_model option is not compatible with FSDP state dict type 'SHARDED_STATE_DICT'"
    )
    best = "can't be used with `save_only_model` along with `load_best_model_at_end`."
    assert sharded in source and best in source
    assert '"SHARDED_STATE_DICT" in str(self.accelerator.state.fsdp_plugin.state_dict_type)' in (
        source
    )
    assert 'wrapper = "DeepSpeed" if self.is_deepspeed_enabled else "FSDP"' in source
    text = section("trainer-fsdp", "save_only_model under FSDP")
    assert f'"{sharded}"' in text and f'"FSDP {best}"' in text
