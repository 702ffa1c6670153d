"""Tokenise text files once, in parallel, into token shards that train.py memory-maps.

    python prepare.py --input 'corpus/*.jsonl' --output data/tokens --tokenizer path/to/tok \
        --val-fraction 0.005 --workers 8

Each ``.jsonl`` file is cut into pieces of about ``--chunk-mb`` at line boundaries and each
piece is tokenised by one worker process into its own shard (``uint16`` tokens when the
vocabulary fits, ``uint32`` otherwise), so one large file is tokenised in parallel too. Any
other file is one document. Every document ends with the end-of-sequence token. A document
goes to the validation split by a hash of its text, so the split does not depend on the
number of workers or pieces. ``index.json`` lists the shards of each split; the output folder
is written aside and renamed into place when complete. Then, in ``train_config.json``:

    "data": {"kind": "tokens", "path": "data/tokens"}
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import zlib
from multiprocessing import Pool
from pathlib import Path

import numpy as np
from data import INDEX_FILE, Tokenizer, document_text, matching_files
from options import ConfigError, run

_tokenizer: Tokenizer | None = None  # one per worker process


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--input", action="append", required=True, help="file or glob; repeat")
    parser.add_argument("--output", type=Path, required=True, help="the folder to write")
    parser.add_argument("--tokenizer", default=None, help="a tokenizer folder (default: bytes)")
    parser.add_argument("--text-field", default="text", help="the text key of .jsonl lines")
    parser.add_argument("--val-fraction", type=float, default=0.0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--chunk-mb", type=float, default=64.0, help="bytes per piece of work")
    return parser.parse_args(argv)


def pieces(path: Path, chunk_bytes: int) -> list[tuple[str, int, int]]:
    """(file, start, end) byte ranges; a .jsonl range starts and ends at line starts."""
    size = path.stat().st_size
    if path.suffix != ".jsonl" or size <= chunk_bytes:
        return [(str(path), 0, size)]
    bounds = [0]
    with open(path, "rb") as f:
        while bounds[-1] + chunk_bytes < size:
            f.seek(bounds[-1] + chunk_bytes)
            f.readline()  # move on to the next line start
            if f.tell() >= size:
                break
            bounds.append(f.tell())
    bounds.append(size)
    return [(str(path), a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def documents(path: str, start: int, end: int, text_field: str):
    if not path.endswith(".jsonl"):
        yield Path(path).read_text(encoding="utf-8")
        return
    with open(path, "rb") as f:
        f.seek(start)
        line_start = start
        for line in iter(f.readline, b""):
            if line_start >= end:
                break
            if line.strip():
                number = f"{path}@{line_start}"  # a byte offset: line numbers need the whole file
                yield document_text(line.decode("utf-8"), text_field, number, "--text-field")
            line_start += len(line)


def start_worker(tokenizer: str | None) -> None:
    global _tokenizer
    _tokenizer = Tokenizer(tokenizer)


def tokenize_piece(job: tuple) -> dict:
    """Tokenise one piece into ``<out>/train-N.bin`` and ``<out>/val-N.bin``."""
    number, (path, start, end), out, text_field, val_fraction, dtype = job
    assert _tokenizer is not None
    split: dict[str, list[int]] = {"train": [], "val": []}
    for doc in documents(path, start, end, text_field):
        held_out = zlib.crc32(doc.encode("utf-8")) / 2**32 < val_fraction
        split["val" if held_out else "train"] += _tokenizer.encode(doc)
    written = {}
    for name, ids in split.items():
        if ids:
            file = f"{name}-{number:06d}.bin"
            np.asarray(ids, dtype=dtype).tofile(Path(out) / file)
            written[name] = {"file": file, "tokens": len(ids), "max_token_id": max(ids)}
    return {"number": number, "bytes": end - start, "shards": written}


def prepare(args: argparse.Namespace) -> dict:
    """Write the token shards and their index; returns the index."""
    if not 0 <= args.val_fraction < 1:
        raise ConfigError("--val-fraction must be in [0, 1)")
    if args.workers < 1 or args.chunk_mb <= 0:
        raise ConfigError("--workers and --chunk-mb must be positive")
    if args.output.exists():
        raise ConfigError(f"{args.output} exists (remove it, or choose another)")
    files = matching_files(args.input, Path.cwd(), "--input")
    tokenizer = Tokenizer(args.tokenizer)
    dtype = "uint16" if tokenizer.vocab_size <= 2**16 else "uint32"
    work = [p for f in files for p in pieces(f, int(args.chunk_mb * 2**20))]
    total_bytes = sum(end - start for _, start, end in work)
    staging = args.output.with_name(f".tmp-{args.output.name}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    jobs = [
        (n, piece, str(staging), args.text_field, args.val_fraction, dtype)
        for n, piece in enumerate(work)
    ]
    results, done_bytes, began = [], 0, time.perf_counter()
    try:
        with Pool(min(args.workers, len(jobs)), start_worker, (args.tokenizer,)) as pool:
            for result in pool.imap_unordered(tokenize_piece, jobs):
                results.append(result)
                done_bytes += result["bytes"]
                tokens = sum(s["tokens"] for r in results for s in r["shards"].values())
                rate = tokens / max(time.perf_counter() - began, 1e-9)
                print(
                    f"\rprepare: {len(results)}/{len(jobs)} pieces, "
                    f"{done_bytes / max(total_bytes, 1):.0%} of {total_bytes / 2**20:.1f} MiB, "
                    f"{tokens:,} tokens ({rate:,.0f}/s)",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
        print(file=sys.stderr)
        results.sort(key=lambda r: r["number"])  # the corpus order, whatever finished first
        index = {
            "format": 1,
            "dtype": dtype,
            "vocab_size": tokenizer.vocab_size,
            "eos_token_id": tokenizer.eos,
            "max_token_id": max(
                (s["max_token_id"] for r in results for s in r["shards"].values()), default=0
            ),
            "tokenizer": args.tokenizer,
            "inputs": [str(f) for f in files],
            "splits": {
                name: [r["shards"][name] for r in results if name in r["shards"]]
                for name in ("train", "val")
            },
        }
        (staging / INDEX_FILE).write_text(json.dumps(index, indent=1))
        os.rename(staging, args.output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return index


def main(argv: list[str] | None = None) -> int:
    index = prepare(parse_args(argv))
    for name, shards in index["splits"].items():
        tokens = sum(s["tokens"] for s in shards)
        print(f"{name}: {tokens:,} tokens in {len(shards)} shards ({index['dtype']})")
    return 0


if __name__ == "__main__":
    run(main, "prepare.py")
