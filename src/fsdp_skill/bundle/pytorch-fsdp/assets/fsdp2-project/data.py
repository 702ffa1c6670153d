"""The data: token sequences from four sources, equal batch counts on every rank, and a
position that resumes exactly, at the same or another world size.

Sources (``data.kind``): synthetic sequences; text files tokenised in memory (small corpora);
token shards written once by ``prepare.py`` and read through memory maps (any size); and a
Hugging Face ``datasets`` dataset, either tokenised and packed by ``datasets.map``
(memory-mapped Arrow files, cached between runs) or, with ``data.streaming``, read as a stream
and packed on the fly.
"""

from __future__ import annotations

import glob
import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from options import ConfigError
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Subset

INDEX_FILE = "index.json"  # the description of a folder of token shards (see prepare.py)


# ---------------------------------------------------------------------------------------------
# Tokenisation (shared with prepare.py)
# ---------------------------------------------------------------------------------------------


class Tokenizer:
    """A Hugging Face tokenizer from a local folder, or UTF-8 bytes when there is none.

    Every document ends with the end-of-sequence token (byte 0 without a tokenizer).
    """

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.hf = None
        if path:
            from transformers import AutoTokenizer

            self.hf = AutoTokenizer.from_pretrained(path)
        self.eos = (self.hf.eos_token_id or 0) if self.hf is not None else 0
        self.vocab_size = len(self.hf) if self.hf is not None else 256

    def encode(self, text: str) -> list[int]:
        if self.hf is None:
            return [*text.encode("utf-8"), self.eos]
        return [*self.hf(text, add_special_tokens=False)["input_ids"], self.eos]

    def encode_prompt(self, text: str) -> list[int]:
        """``text``'s tokens without the end-of-sequence token (a prompt to continue)."""
        return self.encode(text)[:-1]

    def decode(self, ids: list[int]) -> str:
        if self.hf is None:
            return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")
        return self.hf.decode(ids)


def read_documents(path: Path, text_field: str, where: str) -> Iterator[str]:
    """The documents of a ``.jsonl`` file (one JSON object per line) or of a text file (one)."""
    if path.suffix != ".jsonl":
        yield path.read_text(encoding="utf-8")
        return
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                yield document_text(line, text_field, f"{path}:{number}", where)


def document_text(line: str, text_field: str, place: str, where: str) -> str:
    """The ``text_field`` of one JSON line; a one-line error naming the line and the key."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{place}: not valid JSON ({exc.msg})") from None
    if not isinstance(record, dict) or not isinstance(record.get(text_field), str):
        keys = sorted(record) if isinstance(record, dict) else type(record).__name__
        raise ConfigError(
            f"{place}: no text field {text_field!r} (data.text_field in {where}); it has {keys}"
        )
    return record[text_field]


def data_files(cfg: dict, key: str) -> list[Path]:
    """The files named by ``data.<key>``: a path, a glob, or a list of them (sorted, unique)."""
    value = cfg["data"][key]
    patterns = value if isinstance(value, list) else [value]
    if not all(isinstance(p, str) for p in patterns):
        raise ConfigError(f"{cfg['config_file']}: data.{key} must name files, not {value!r}")
    return matching_files(patterns, Path(cfg["base_dir"]), f"{cfg['config_file']}: data.{key}")


def matching_files(patterns: list[str], base: Path, what: str) -> list[Path]:
    """The files that ``patterns`` (paths or globs, relative to ``base``) name, in order."""
    found: list[Path] = []
    for pattern in patterns:
        full = str(base / Path(pattern).expanduser())
        matches = sorted(glob.glob(full)) if glob.has_magic(full) else [full]
        files = [Path(m) for m in matches if Path(m).is_file()]
        if not files:
            raise ConfigError(f"{what} {pattern!r} matches no file")
        found += [f for f in files if f not in found]
    return found


# ---------------------------------------------------------------------------------------------
# Datasets: index -> one sequence of seq_len token ids
# ---------------------------------------------------------------------------------------------


class SyntheticTokens(Dataset):
    """Arithmetic token sequences, deterministic per index: learnable, so the loss falls."""

    def __init__(self, num_samples: int, seq_len: int, vocab: int, seed: int) -> None:
        self.num_samples, self.seq_len, self.vocab, self.seed = num_samples, seq_len, vocab, seed

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, index: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        start = int(torch.randint(self.vocab, (1,), generator=gen))
        stride = int(torch.randint(1, 8, (1,), generator=gen))
        return (start + stride * torch.arange(self.seq_len)) % self.vocab


class TokenChunks(Dataset):
    """Text files, tokenised in memory at start and cut into fixed-length sequences.

    For corpora that fit in memory several times over (every rank tokenises them); larger
    ones belong in token shards (``prepare.py``, ``data.kind: tokens``).
    """

    def __init__(self, files: list[Path], tokenizer: Tokenizer, cfg: dict, vocab: int) -> None:
        ids: list[int] = []
        for path in files:
            for doc in read_documents(path, cfg["data"]["text_field"], cfg["config_file"]):
                ids += tokenizer.encode(doc)
        if max(ids, default=0) >= vocab:
            raise ConfigError(f"{files[0]}: token id {max(ids)} >= the model's vocab_size {vocab}")
        seq_len = cfg["data"]["seq_len"]
        usable = len(ids) // seq_len * seq_len
        if usable == 0:
            raise ConfigError(f"{files[0]}: fewer than data.seq_len={seq_len} tokens in all")
        self.chunks = torch.tensor(ids[:usable]).view(-1, seq_len)

    def __len__(self) -> int:
        return len(self.chunks)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.chunks[index]


class TokenShards(Dataset):
    """Token shards written by ``prepare.py``, read through memory maps.

    Only the pages of the sequences read are loaded, and they are shared by all the ranks of
    a machine through the page cache: memory does not grow with the corpus. A sequence never
    crosses a shard boundary; a shard's last partial sequence is left out.
    """

    def __init__(self, folder: Path, split: str, seq_len: int) -> None:
        index = json.loads((folder / INDEX_FILE).read_text())
        self.vocab_size, self.seq_len = index["vocab_size"], seq_len
        self.shards, self.starts = [], [0]
        for shard in index["splits"].get(split, []):
            tokens = np.memmap(folder / shard["file"], dtype=index["dtype"], mode="r")
            if len(tokens) != shard["tokens"]:
                raise ConfigError(
                    f"{folder / shard['file']}: {len(tokens)} tokens, index says "
                    f"{shard['tokens']}: run prepare.py again"
                )
            if len(tokens) >= seq_len:
                self.shards.append(tokens)
                self.starts.append(self.starts[-1] + len(tokens) // seq_len)

    def __len__(self) -> int:
        return self.starts[-1]

    def __getitem__(self, index: int) -> torch.Tensor:
        shard = int(np.searchsorted(self.starts, index, side="right")) - 1
        begin = (index - self.starts[shard]) * self.seq_len
        window = self.shards[shard][begin : begin + self.seq_len]
        return torch.from_numpy(window.astype(np.int64))


class HFSequences(Dataset):
    """A Hugging Face dataset, tokenised and packed into sequences by ``datasets.map``.

    ``data.path`` is a folder written by ``Dataset.save_to_disk``, a folder of data files, or
    the name of a dataset in the local cache (with ``HF_HUB_OFFLINE=1`` nothing is fetched).
    The mapped Arrow files are memory-mapped and cached, so the next start skips the work.
    """

    def __init__(self, cfg: dict, split: str, tokenizer: Tokenizer, rank: int) -> None:
        raw = load_hf_split(cfg, split)
        import datasets  # present: load_hf_split checked it

        field = cfg["data"]["text_field"]
        seq_len = cfg["data"]["seq_len"]

        def tokenize(batch: dict) -> dict:
            return {"ids": [tokenizer.encode(text) for text in batch[field]]}

        def pack(batch: dict) -> dict:
            flat = [t for ids in batch["ids"] for t in ids]
            usable = len(flat) // seq_len * seq_len
            return {"input_ids": [flat[i : i + seq_len] for i in range(0, usable, seq_len)]}

        if rank:
            datasets.disable_progress_bars()
        # Rank 0 maps first and writes the cache; the others then find it (same fingerprint).
        together = dist.is_initialized()
        if together and rank != 0:
            dist.barrier()
        tokens = raw.map(tokenize, batched=True, remove_columns=raw.column_names)
        packed = tokens.map(pack, batched=True, remove_columns=["ids"])
        if together and rank == 0:
            dist.barrier()
        self.rows = packed.with_format("torch")

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.rows[int(index)]["input_ids"].long()


def load_hf_split(cfg: dict, split: str, streaming: bool = False):
    """One split of the dataset named by ``data.path`` (a saved folder, data files or a name);
    with ``streaming``, data files and names give an ``IterableDataset`` that reads lazily."""
    try:
        import datasets
    except ImportError:
        raise ConfigError(
            f"{cfg['config_file']}: data.kind 'hf' needs the datasets package "
            "(pip install datasets)"
        ) from None
    name = cfg["data"]["path"]
    local = Path(cfg["base_dir"]) / name
    try:
        if (local / "dataset_dict.json").is_file() or (local / "state.json").is_file():
            loaded = datasets.load_from_disk(str(local))
        else:
            where = str(local) if local.exists() else name
            loaded = datasets.load_dataset(where, split=split, streaming=streaming)
    except Exception as exc:  # not found, offline, a bad folder: one line, not a traceback
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"{cfg['config_file']}: data.path {name!r}: {message}") from None
    if isinstance(loaded, datasets.DatasetDict):
        if split not in loaded:
            raise ConfigError(
                f"{cfg['config_file']}: data split {split!r} is not in {name} "
                f"(it has {sorted(loaded)})"
            )
        loaded = loaded[split]
    return loaded


def streamed_split(cfg: dict, split: str):
    """One split as a ``datasets.IterableDataset`` of the text column only, read in stored
    order (a ``save_to_disk`` folder is read from its memory-mapped Arrow files)."""
    loaded = load_hf_split(cfg, split, streaming=True)
    import datasets  # present: load_hf_split checked it

    if isinstance(loaded, datasets.Dataset):  # a save_to_disk folder: map-style
        loaded = loaded.to_iterable_dataset()
    return loaded.select_columns([cfg["data"]["text_field"]])


class PackedStream:
    """A Hugging Face dataset read as a stream (``data.streaming``): documents are tokenised
    and packed into ``seq_len`` sequences as they are read, never held all at once.

    The global order of sequences is the documents in their stored order, cut into
    consecutive sequences, epoch after epoch (an epoch's last partial sequence is dropped).
    It does not depend on the world size: every rank reads the whole stream and keeps its own
    share (``StreamBatches``). A position is the epoch, the source's ``state_dict()`` before a
    document, and how many of that document's tokens are already used; resuming there
    re-reads and re-tokenises that one document only. The source keeps the state of its
    current reading, so one ``sequences()`` iterator at a time reads a given PackedStream.
    """

    def __init__(self, cfg: dict, split: str, tokenizer: Tokenizer, vocab: int) -> None:
        self.source = streamed_split(cfg, split)
        self.start_state = self.source.state_dict()
        self.tokenizer, self.vocab = tokenizer, vocab
        self.field, self.seq_len = cfg["data"]["text_field"], cfg["data"]["seq_len"]
        self.where = f"{cfg['data']['path']} ({split})"

    def encode(self, record: dict) -> list[int]:
        text = record.get(self.field)
        if not isinstance(text, str):
            raise ConfigError(f"{self.where}: a record whose {self.field!r} is not text: {text!r}")
        ids = self.tokenizer.encode(text)
        if max(ids) >= self.vocab:
            raise ConfigError(
                f"{self.where}: token id {max(ids)} >= the model's vocab_size {self.vocab}"
            )
        return ids

    def sequences(self, position: dict | None = None) -> Iterator[tuple[list[int], dict]]:
        """Endless (sequence, position just after it) pairs, from ``position`` (None: the
        start)."""
        position = position or {"epoch": 0, "source": self.start_state, "used": 0}
        epoch, state, used = position["epoch"], position["source"], position["used"]
        from_start = state == self.start_state and used == 0
        while True:
            self.source.load_state_dict(state)
            buffer: list[int] = []
            found = False
            for record in self.source:
                ids = self.encode(record)
                buffer += ids[used:]
                cut = 0  # cut sequences by an offset: slicing off each one would be quadratic
                while len(buffer) - cut >= self.seq_len:
                    sequence, cut = buffer[cut : cut + self.seq_len], cut + self.seq_len
                    found = True
                    # What is left of the buffer after a cut is the tail of this document.
                    left = len(buffer) - cut
                    yield sequence, {"epoch": epoch, "source": state, "used": len(ids) - left}
                buffer = buffer[cut:]
                state, used = self.source.state_dict(), 0  # the state before the next document
            if from_start and not found:
                raise ConfigError(
                    f"{self.where}: fewer than data.seq_len={self.seq_len} tokens in all"
                )
            epoch, state, used, from_start = epoch + 1, self.start_state, 0, True

    def head(self, count: int) -> list[torch.Tensor]:
        """The first ``count`` sequences of one pass (fewer if the split is shorter)."""
        first: list[torch.Tensor] = []
        for sequence, position in self.sequences():
            if position["epoch"] > 0 or len(first) == count:
                break
            first.append(torch.tensor(sequence))
        return first


def check_sources(cfg: dict, vocab: int) -> None:
    """Find what would fail in ``build_datasets`` cheaply, before any process group exists:
    missing files, a text field that is not there, token shards for a larger vocabulary."""
    data, source = cfg["data"], cfg["config_file"]
    has_val = bool(data["val_path"] or data["val_split"] or data["val_fraction"] > 0)
    if data["kind"] == "tokens" and not has_val:
        index = Path(cfg["base_dir"]) / data["path"] / INDEX_FILE
        has_val = index.is_file() and bool(json.loads(index.read_text())["splits"].get("val"))
    if cfg["eval"]["every"] and not has_val:
        raise ConfigError(
            f"{source}: eval.every needs validation data "
            "(data.val_path, data.val_split, or data.val_fraction > 0)"
        )
    if data["kind"] == "text":
        for key in ("path", "val_path"):
            for path in data_files(cfg, key) if data[key] else []:
                next(read_documents(path, data["text_field"], source), None)
    elif data["kind"] == "tokens":
        for key in ("path", "val_path"):
            folder = Path(cfg["base_dir"]) / data[key] if data[key] else None
            if folder is not None and not (folder / INDEX_FILE).is_file():
                raise ConfigError(
                    f"{source}: data.{key} {data[key]!r} has no {INDEX_FILE} "
                    "(write it with prepare.py)"
                )
            if folder is not None:
                index = json.loads((folder / INDEX_FILE).read_text())
                largest = index.get("max_token_id", index["vocab_size"] - 1)
                check_vocab(largest + 1, vocab, str(folder / INDEX_FILE), source)
    elif data["kind"] == "hf":
        for split in filter(None, (data["split"], data["val_split"])):
            if data["streaming"]:  # a stream's columns may be unknown until a record is read
                first = next(iter(load_hf_split(cfg, split, streaming=True)), None)
                columns = sorted(first) if first is not None else []
            else:
                columns = load_hf_split(cfg, split).column_names
            if data["text_field"] not in columns:
                raise ConfigError(
                    f"{data['path']} ({split}): no column {data['text_field']!r} "
                    f"(data.text_field in {source}); it has {columns}"
                )


def build_datasets(
    cfg: dict, vocab: int, rank: int
) -> tuple[Dataset | PackedStream, Dataset | PackedStream | None]:
    """(training sequences, validation sequences or None) for ``data.kind``."""
    data, source = cfg["data"], cfg["config_file"]
    kind, val = data["kind"], None
    if kind == "synthetic":
        train = SyntheticTokens(data["num_samples"], data["seq_len"], vocab, cfg["train"]["seed"])
    elif kind == "text":
        tokenizer = project_tokenizer(cfg, vocab)
        train = TokenChunks(data_files(cfg, "path"), tokenizer, cfg, vocab)
        if data["val_path"]:
            val = TokenChunks(data_files(cfg, "val_path"), tokenizer, cfg, vocab)
    elif kind == "tokens":
        folder = Path(cfg["base_dir"]) / data["path"]
        train = TokenShards(folder, "train", data["seq_len"])
        val_folder = Path(cfg["base_dir"]) / data["val_path"] if data["val_path"] else folder
        val = TokenShards(val_folder, "val", data["seq_len"])
        val = val if len(val) else None
    elif data["streaming"]:  # no length: an empty stream is found when it is first read
        tokenizer = project_tokenizer(cfg, vocab)
        train = PackedStream(cfg, data["split"], tokenizer, vocab)
        if data["val_split"]:
            val = PackedStream(cfg, data["val_split"], tokenizer, vocab)
        return train, val
    else:
        tokenizer = project_tokenizer(cfg, vocab)
        train = HFSequences(cfg, data["split"], tokenizer, rank)
        if data["val_split"]:
            val = HFSequences(cfg, data["val_split"], tokenizer, rank)
    if len(train) == 0:
        raise ConfigError(f"{source}: data.path holds no sequence of data.seq_len tokens")
    if val is None and data["val_fraction"] > 0:
        train, val = split_off(train, data["val_fraction"])
    return train, val


def project_tokenizer(cfg: dict, vocab: int) -> Tokenizer:
    """``data.tokenizer`` (or bytes), checked against the model's vocabulary."""
    named = cfg["data"]["tokenizer"]
    tokenizer = Tokenizer(named and str(Path(cfg["base_dir"]) / named))
    if tokenizer.hf is not None:  # bytes are checked on the data: ASCII fits 128 ids
        check_vocab(tokenizer.vocab_size, vocab, "the tokenizer", cfg["config_file"])
    return tokenizer


def check_vocab(data_vocab: int, model_vocab: int, what: str, source: str) -> None:
    if data_vocab > model_vocab:
        raise ConfigError(
            f"{source}: {what} has {data_vocab} token ids but the model's vocab_size is "
            f"{model_vocab}"
        )


def split_off(dataset: Dataset, fraction: float) -> tuple[Dataset, Dataset]:
    """The first sequences for training and the last ``fraction`` of them for validation."""
    n = len(dataset)
    held = max(1, math.ceil(n * fraction))
    if held >= n:
        raise ConfigError(
            f"data.val_fraction {fraction} leaves nothing to train on ({n} sequences)"
        )
    return Subset(dataset, range(n - held)), Subset(dataset, range(n - held, n))


# ---------------------------------------------------------------------------------------------
# Order and position
# ---------------------------------------------------------------------------------------------


class ResumableSampler(DistributedSampler):
    """DistributedSampler that can start an epoch after ``start`` samples already seen.

    An epoch is its shuffled order (by seed + epoch) cut to a whole number of optimizer steps
    of ``step_samples`` (the global batch); the few samples left over are left out that epoch,
    and another shuffle leaves out others the next. Neither the order nor the cut depends on
    the world size, so a position saved at one world size resumes exactly at another: the
    same samples in every later step. Every rank gets the same number of samples: FSDP
    modules are not Joinable, so a rank that ran out of batches early would leave the others
    waiting in a collective.
    """

    def __init__(
        self, dataset: Dataset, world: int, rank: int, seed: int, step_samples: int
    ) -> None:
        super().__init__(dataset, num_replicas=world, rank=rank, shuffle=True, seed=seed)
        if len(dataset) < step_samples:
            raise ConfigError(
                f"the training data holds {len(dataset)} sequences, fewer than one global "
                f"batch ({step_samples}): use more data or a smaller batch"
            )
        self.step_samples = step_samples
        self.start = 0

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        super().set_epoch(epoch)
        self.start = start

    def _global_order(self) -> list[int]:
        gen = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.dataset), generator=gen).tolist()
        rest = order[self.start : len(order) // self.step_samples * self.step_samples]
        # a position saved with another global batch may leave a part of a step: left out too
        return rest[: len(rest) // self.step_samples * self.step_samples]

    def __iter__(self) -> Iterator[int]:
        return iter(self._global_order()[self.rank :: self.num_replicas])

    def __len__(self) -> int:
        return len(self._global_order()) // self.num_replicas


class Batches:
    """Endless micro-batches across epochs, with the position (epoch, samples seen) to save."""

    def __init__(self, loader: DataLoader, sampler: ResumableSampler, world: int) -> None:
        self.loader, self.sampler, self.world = loader, sampler, world
        self.epoch, self.consumed = 0, 0  # consumed: global samples of this epoch already used
        self._it: Iterator | None = None

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "consumed": self.consumed}

    def load_state_dict(self, state: dict) -> None:
        if "consumed" not in state:
            raise ConfigError(CHANGED_SOURCE)
        self.epoch, self.consumed = state["epoch"], state["consumed"]
        self._it = None

    def next(self) -> torch.Tensor:
        while True:
            if self._it is None:
                self.sampler.set_epoch(self.epoch, start=self.consumed)
                self._it = iter(self.loader)
            batch = next(self._it, None)
            if batch is not None:
                self.consumed += len(batch) * self.world  # same count on every rank
                return batch
            self.epoch, self.consumed, self._it = self.epoch + 1, 0, None

    def close(self) -> None:
        """Stop the loader's worker processes now rather than at interpreter exit."""
        self._it = None


CHANGED_SOURCE = (
    "the checkpoint's data position is for another kind of source (data.streaming changed "
    "since it was written): resume with the same data settings"
)


class StreamBatches:
    """Endless micro-batches from a ``PackedStream``, with the position to save.

    Each micro-batch takes the next ``micro_batch x world`` sequences of the global order and
    rank r keeps those at r, r + world, ...: a step (a fixed global batch) uses the same
    sequences at any world size, only split otherwise. The position, the same on every rank,
    is the one just after those sequences, so it is valid at any world size.
    """

    def __init__(self, stream: PackedStream, micro_batch: int, rank: int, world: int) -> None:
        self.stream, self.micro_batch, self.rank, self.world = stream, micro_batch, rank, world
        self.position: dict | None = None  # None: the start of the stream
        self.sequences = 0  # global sequences used so far, for the logs and the tests
        self.epoch = 0
        self._it: Iterator | None = None

    def state_dict(self) -> dict:
        return {"stream": self.position, "sequences": self.sequences}

    def load_state_dict(self, state: dict) -> None:
        if "stream" not in state:
            raise ConfigError(CHANGED_SOURCE)
        self.position, self.sequences = state["stream"], state["sequences"]
        self.epoch = self.position["epoch"] if self.position else 0
        self._it = None

    def next(self) -> torch.Tensor:
        if self._it is None:
            self._it = self.stream.sequences(self.position)
        group = [next(self._it) for _ in range(self.micro_batch * self.world)]
        self.position = group[-1][1]
        self.epoch = self.position["epoch"]
        self.sequences += len(group)
        return torch.tensor([sequence for sequence, _ in group[self.rank :: self.world]])

    def close(self) -> None:
        self._it = None


def training_batches(
    dataset: Dataset | PackedStream,
    micro_batch: int,
    cfg: dict,
    rank: int,
    world: int,
    device: torch.device,
    step_samples: int,
) -> Batches | StreamBatches:
    """Micro-batches of ``micro_batch`` sequences for this rank; ``step_samples`` sequences
    (the global batch) make one optimizer step."""
    if isinstance(dataset, PackedStream):
        return StreamBatches(dataset, micro_batch, rank, world)
    sampler = ResumableSampler(dataset, world, rank, cfg["train"]["seed"], step_samples)
    loader = DataLoader(
        dataset,
        batch_size=micro_batch,
        sampler=sampler,
        drop_last=False,  # an epoch is whole steps: every micro-batch is full
        num_workers=cfg["data"]["num_workers"],
        pin_memory=device.type == "cuda",
    )
    return Batches(loader, sampler, world)


def validation_batches(
    dataset: Dataset | PackedStream, micro_batch: int, count: int, rank: int, world: int
) -> list[torch.Tensor]:
    """The same ``count`` micro-batches of validation data at every evaluation (fewer if the
    set is small), equally many on every rank, so every rank joins every forward."""
    if isinstance(dataset, PackedStream):  # its first sequences are the validation set
        dataset = dataset.head(count * micro_batch * world)
    per_rank = min(len(dataset) // world, count * micro_batch)
    if per_rank == 0:
        raise ConfigError(
            f"the validation data holds {len(dataset)} sequences, fewer than the {world} ranks"
        )
    indices = list(range(rank, per_rank * world, world))
    return [
        torch.stack([dataset[i] for i in indices[b : b + micro_batch]])
        for b in range(0, per_rank, micro_batch)
    ]
