"""Load flight-recorder dumps (pickles) without running any code from them, in bounded time
and memory.

A pickle can name any importable callable and call it while loading. Dumps written by the
flight recorder contain only dicts, lists, tuples, strings, numbers, booleans and None, which
the unpickler builds without looking anything up; so every lookup of a global or a persistent
object is refused, and the dump cannot make the loader run code.

A pickle of plain data can still be hostile: its memo lets one object be used many times, so
a few hundred bytes can describe a list of a billion billion strings ("billion laughs"),
which anything that walks it (``str()``, a loop) never finishes. Before loading, the opcodes
are checked against a model of the unpickler's stack that counts every use of a shared
object as the whole object again: too many objects counted that way, nesting too deep, a
structure that contains itself, or any opcode outside plain data refuses the pickle, before
a single object is built.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from typing import Any

MAX_OBJECTS = 10_000_000
"""Objects a dump may hold, each use of a shared one counted again: a dump of 2,000 entries
with 40-frame stacks (the buffer size the flight recorder is usually given) counts about
0.7 million, one of 20,000 entries with 60-frame stacks about 9.4 million
(``benchmarks/dump_bench.py`` writes such dumps)."""
MAX_DEPTH = 64
"""Nesting a dump may have (a real dump nests 5 deep: dump, entries, entry, frames, frame)."""


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle asked for something other than plain containers and scalars, or more of
    them than a flight-recorder dump holds."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise UnsafePickleError(f"refused to load {module}.{name}: only plain data is allowed")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("refused a persistent reference: only plain data is allowed")


def loads_plain(data: bytes, max_objects: int = MAX_OBJECTS, max_depth: int = MAX_DEPTH) -> Any:
    """Unpickle ``data`` if it holds only plain containers, within the bounds; raise
    ``UnpicklingError`` otherwise."""
    check_shape(data, max_objects, max_depth)
    try:
        return _PlainUnpickler(io.BytesIO(data)).load()
    except pickle.UnpicklingError:
        raise
    except (EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError) as exc:
        raise pickle.UnpicklingError(f"not a readable pickle: {exc}") from None


# --- the opcode check ---------------------------------------------------------------------
# One loop over the opcodes, written out for speed (it reads every opcode of dumps that
# have millions): a stack of node ids, where a node is a container and lists what was put
# in it, and -1 stands for any scalar. Argument sizes come from pickletools' opcode table,
# the reference description of the format.

_SCALAR = -1

_PUSH_SCALAR = frozenset(
    "NONE NEWTRUE NEWFALSE INT BININT BININT1 BININT2 LONG LONG1 LONG4 FLOAT BINFLOAT "
    "STRING BINSTRING SHORT_BINSTRING UNICODE BINUNICODE SHORT_BINUNICODE BINUNICODE8 "
    "BINBYTES SHORT_BINBYTES BINBYTES8 BYTEARRAY8".split()
)
_KIND = {
    **{name: "scalar" for name in _PUSH_SCALAR},
    **dict.fromkeys(("EMPTY_LIST", "EMPTY_DICT", "EMPTY_SET", "EMPTY_TUPLE"), "empty"),
    **dict.fromkeys(("LIST", "TUPLE", "DICT", "FROZENSET"), "build"),
    **dict.fromkeys(("APPENDS", "SETITEMS", "ADDITEMS"), "add_mark"),
    "APPEND": "add1",
    "SETITEM": "add2",
    "TUPLE1": "tuple1",
    "TUPLE2": "tuple2",
    "TUPLE3": "tuple3",
    **dict.fromkeys(("PUT", "BINPUT", "LONG_BINPUT"), "put"),
    "MEMOIZE": "memoize",
    **dict.fromkeys(("GET", "BINGET", "LONG_BINGET"), "get"),
    "MARK": "mark",
    "POP": "pop",
    "POP_MARK": "pop_mark",
    "DUP": "dup",
    "PROTO": "skip",
    "FRAME": "skip",
    "STOP": "stop",
}
"""What each plain-data opcode does to the model; every other opcode is refused."""
_LENGTH_BYTES = {
    pickletools.TAKEN_FROM_ARGUMENT1: (1, False),
    pickletools.TAKEN_FROM_ARGUMENT4: (4, True),
    pickletools.TAKEN_FROM_ARGUMENT4U: (4, False),
    pickletools.TAKEN_FROM_ARGUMENT8U: (8, False),
}
_PUSHES = frozenset({"get", "dup", "empty", "build", "tuple1", "tuple2", "tuple3"})
_OPCODES = {
    op.code.encode("latin-1")[0]: (op.name, _KIND.get(op.name), op.arg.n if op.arg else 0)
    for op in pickletools.opcodes
}


def check_shape(data: bytes, max_objects: int = MAX_OBJECTS, max_depth: int = MAX_DEPTH) -> None:
    """Refuse (``UnsafePickleError``) a pickle that is not plain data within the bounds.

    Runs the opcodes on a model of the unpickler (nothing is built), then measures the
    object the pickle returns, counting every use of a shared node as the whole node again.
    """
    children: list[list[int]] = []
    stack: list[int] = []
    marks: list[int] = []
    memo: dict[int, int] = {}
    uses = 0  # objects pushed, each use of a memo entry counted: bounds all of the above
    i, end = 0, len(data)
    while True:
        if i >= end:
            raise UnsafePickleError("not a readable pickle: it ends before its STOP opcode")
        op = _OPCODES.get(data[i])
        if op is None:
            raise UnsafePickleError(f"not a readable pickle: unknown opcode at byte {i}")
        name, kind, size = op
        if kind is None:
            raise UnsafePickleError(
                f"refused to load what opcode {name} asks for: only plain data is allowed"
            )
        i += 1
        arg = b""
        if size > 0:
            arg = data[i : i + size]
            i += size
        elif size == pickletools.UP_TO_NEWLINE:
            newline = data.find(b"\n", i)
            if newline < 0:
                raise UnsafePickleError("not a readable pickle: it is cut short")
            arg = data[i:newline]
            i = newline + 1
        elif size < 0:
            width, signed = _LENGTH_BYTES[size]
            length = int.from_bytes(data[i : i + width], "little", signed=signed)
            if length < 0:
                raise UnsafePickleError("not a readable pickle: a negative length")
            i += width + length
        if i > end:
            raise UnsafePickleError("not a readable pickle: it is cut short")
        if kind == "scalar":
            uses += 1
            if uses > max_objects:
                raise UnsafePickleError(f"more than {max_objects} objects")
            stack.append(_SCALAR)
            continue
        fence = marks[-1] if marks else 0
        if kind == "get":
            key = int(arg) if name == "GET" else int.from_bytes(arg, "little")
            if key not in memo:
                raise UnsafePickleError(f"malformed pickle: memo entry {key} is not set")
            stack.append(memo[key])
        elif kind in ("memoize", "put", "dup"):
            if len(stack) <= fence:
                raise UnsafePickleError("malformed pickle: stack underflow")
            if kind == "dup":
                stack.append(stack[-1])
            else:
                key = (
                    len(memo)
                    if kind == "memoize"
                    else (int(arg) if name == "PUT" else int.from_bytes(arg, "little"))
                )
                memo[key] = stack[-1]
        elif kind == "mark":
            marks.append(len(stack))
        elif kind in ("empty", "build", "tuple1", "tuple2", "tuple3"):
            if kind == "empty":
                items = []
            elif kind == "build":
                if not marks:
                    raise UnsafePickleError("malformed pickle: no mark on the stack")
                items = stack[marks.pop() :]
            else:
                count = int(kind[-1])
                if len(stack) - fence < count:
                    raise UnsafePickleError("malformed pickle: stack underflow")
                items = stack[len(stack) - count :]
            del stack[len(stack) - len(items) :]
            children.append(items)
            stack.append(len(children) - 1)
        elif kind in ("add_mark", "add1", "add2"):
            if kind == "add_mark":
                if not marks:
                    raise UnsafePickleError("malformed pickle: no mark on the stack")
                start = marks.pop()
            else:
                start = len(stack) - (1 if kind == "add1" else 2)
                if start < fence:
                    raise UnsafePickleError("malformed pickle: stack underflow")
            items = stack[start:]
            del stack[start:]
            if len(stack) <= (marks[-1] if marks else 0) or stack[-1] == _SCALAR:
                raise UnsafePickleError("malformed pickle: no container to add to")
            children[stack[-1]].extend(items)
        elif kind == "pop":
            if len(stack) > fence:
                stack.pop()
            elif marks:
                del stack[marks.pop() :]
            else:
                raise UnsafePickleError("malformed pickle: stack underflow")
        elif kind == "pop_mark":
            if not marks:
                raise UnsafePickleError("malformed pickle: no mark on the stack")
            del stack[marks.pop() :]
        elif kind == "stop":
            break
        uses += kind in _PUSHES
        if uses > max_objects:
            raise UnsafePickleError(f"more than {max_objects} objects")
    if len(stack) != 1 or marks:
        raise UnsafePickleError("malformed pickle: it does not end with one object")
    if stack[0] != _SCALAR:
        _measure(stack[0], children, max_objects, max_depth)


def _only_scalars(items: list[int]) -> bool:
    return items.count(_SCALAR) == len(items)


def _measure(root: int, children: list[list[int]], max_objects: int, max_depth: int) -> None:
    """Refuse a structure that contains itself, nests deeper than ``max_depth``, or holds
    more than ``max_objects`` once every shared node is counted at each use.

    Each node is measured once (its size and depth are kept), so this takes time in the
    number of distinct nodes, however often they are shared.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path = {root}
    pending: list[tuple[int, int]] = [(root, 0)]  # (node, children measured so far)
    while pending:
        node, done = pending[-1]
        items = children[node]
        while done < len(items):
            child = items[done]
            if child == _SCALAR or child in size:
                done += 1
            elif _only_scalars(children[child]):  # most nodes: a frame, a shape
                size[child] = 1 + len(children[child])
                depth[child] = 1
                done += 1
            else:
                break
        if done < len(items):
            if child in on_path:
                raise UnsafePickleError("a structure that contains itself")
            if len(pending) >= max_depth:
                raise UnsafePickleError(f"nested more than {max_depth} deep")
            pending[-1] = (node, done)
            pending.append((child, 0))
            on_path.add(child)
            continue
        pending.pop()
        on_path.discard(node)
        total, deepest = 1, 0
        for child in items:
            if child == _SCALAR:
                total += 1
            else:
                total += size[child]
                deepest = max(deepest, depth[child])
        if total > max_objects:
            raise UnsafePickleError(
                f"more than {max_objects} objects once shared parts are counted at each use"
            )
        size[node] = total
        depth[node] = deepest + 1
