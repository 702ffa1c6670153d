"""Train a tiny model with Hugging Face Trainer for one epoch, saving every 5 steps, and record
the samples it trained on (run under torchrun; Gloo on CPU).

    trainer_resume.py OUT_DIR [--accum N] [--resume CHECKPOINT]

Each rank writes ``OUT_DIR/seen-<rank>.json``: the dataset indices its forward passes saw, in
order (batches skipped on resume never reach forward), the run's ``max_steps`` and
the learning rate of each step it took.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from transformers import Trainer, TrainerCallback, TrainingArguments

SAMPLES, BATCH, SAVE_AT = 48, 2, 5


class Indices(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, i: int) -> dict:
        return {"index": torch.tensor(i), "x": torch.randn(4), "labels": torch.randn(1)}


class Recorder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 1)
        self.seen: list[int] = []

    def forward(self, index, x, labels):
        self.seen += index.tolist()
        return {"loss": nn.functional.mse_loss(self.linear(x), labels)}


class Rates(TrainerCallback):
    """The learning rate of each step this run takes."""

    def __init__(self) -> None:
        self.rates: list[float] = []

    def on_step_begin(self, args, state, control, lr_scheduler=None, **kwargs):
        self.rates.append(lr_scheduler.get_last_lr()[0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--accum", type=int, default=1)
    parser.add_argument("--resume")
    args = parser.parse_args()
    model = Recorder()
    training = TrainingArguments(
        output_dir=args.out,
        per_device_train_batch_size=BATCH,
        gradient_accumulation_steps=args.accum,
        num_train_epochs=1,
        save_steps=SAVE_AT,
        save_strategy="steps",
        logging_steps=100,
        report_to=[],
        use_cpu=True,
        ddp_backend="gloo",
        remove_unused_columns=False,
        seed=0,
    )
    rates = Rates()
    trainer = Trainer(model=model, args=training, train_dataset=Indices(), callbacks=[rates])
    trainer.train(resume_from_checkpoint=args.resume)
    rank = int(os.environ.get("RANK", "0"))
    with open(os.path.join(args.out, f"seen-{rank}.json"), "w", encoding="utf-8") as f:
        json.dump(
            {"seen": model.seen, "max_steps": trainer.state.max_steps, "rates": rates.rates}, f
        )
    if dist.is_initialized():
        dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # before main's objects are freed: see tests/rank_main.py


if __name__ == "__main__":
    main()
