"""Export the model of a training checkpoint: a Hugging Face folder or a plain state dict.

    python export.py --checkpoint checkpoints/best --output my-model             # save_pretrained
    python export.py --checkpoint checkpoints/step_00001000 --output w --format torch  # model.pt

One process, no GPU and no process group: DCP reads the shards of any world size into one
model on CPU (so the machine needs the model's size in RAM, once). ``--format hf`` writes
``config.json`` and safetensors weights with ``save_pretrained`` (tied weights stored once),
plus the tokenizer when the config names one, so ``AutoModelForCausalLM.from_pretrained``
loads the folder; ``--format torch`` writes the state dict to ``model.pt``. The output
folder is written aside and renamed into place when complete.
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from checkpoint import COMPLETE, complete_checkpoints
from model import load_hf_config, materialize_, model_source
from options import ConfigError, load_options, run
from options import parse_args as train_args

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--config", type=Path, default=Path(__file__).with_name("train_config.json")
    )
    parser.add_argument(
        "--checkpoint", type=Path, default=None, help="a step_N or best folder (default: newest)"
    )
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--format", choices=["hf", "torch"], default="hf")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="fp32")
    return parser.parse_args(argv)


def checkpoint_folder(args: argparse.Namespace, cfg: dict) -> Path:
    if args.checkpoint is None:
        done = complete_checkpoints(Path(cfg["checkpoint"]["dir"]))
        if not done:
            raise ConfigError(f"no complete checkpoint in {cfg['checkpoint']['dir']}")
        return done[-1]
    if not (args.checkpoint / COMPLETE).is_file():
        raise ConfigError(f"--checkpoint {args.checkpoint}: not a complete checkpoint folder")
    return args.checkpoint


def load_model(cfg: dict, folder: Path) -> torch.nn.Module:
    """The whole model on CPU with the checkpoint's weights (fp32, as trained)."""
    from transformers import AutoModelForCausalLM

    hf_config = load_hf_config(cfg, model_source(cfg))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config, dtype=torch.float32)
    for module in model.modules():  # storage and the computed buffers (rotary frequencies)
        materialize_(model, module, torch.device("cpu"))
    if getattr(model.config, "tie_word_embeddings", False):
        model.tie_weights()
    state = {"model": model.state_dict()}
    dcp.load(state, checkpoint_id=folder)  # no process group: one process reads every shard
    model.load_state_dict(state["model"])
    return model


def export(args: argparse.Namespace) -> Path:
    cfg = load_options(train_args(["--config", str(args.config), "--device", "cpu"]))
    folder = checkpoint_folder(args, cfg)
    if args.output.exists():
        raise ConfigError(f"--output {args.output} exists (remove it, or choose another)")
    model = load_model(cfg, folder).to(DTYPES[args.dtype])
    staging = args.output.with_name(f".tmp-{args.output.name}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        if args.format == "hf":
            model.save_pretrained(staging)
            tokenizer = cfg["data"]["tokenizer"] or cfg["model"]["name_or_path"]
            if tokenizer and (Path(cfg["base_dir"]) / tokenizer).is_dir():
                from transformers import AutoTokenizer

                try:
                    AutoTokenizer.from_pretrained(
                        str(Path(cfg["base_dir"]) / tokenizer)
                    ).save_pretrained(staging)
                except (OSError, ValueError):
                    pass  # a model folder without a tokenizer: the weights are enough
        else:
            torch.save(model.state_dict(), staging / "model.pt")
        os.rename(staging, args.output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return args.output


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = export(args)
    print(f"exported {args.checkpoint or 'the newest checkpoint'} to {out} ({args.format})")
    return 0


if __name__ == "__main__":
    run(main, "export.py")
