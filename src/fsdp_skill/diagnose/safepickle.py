"""Load flight-recorder dumps (pickles) without running any code from them.

A pickle can name any importable callable and call it while loading. Dumps written by the
flight recorder contain only dicts, lists, tuples, strings, numbers, booleans and None, which
the unpickler builds without looking anything up; so every lookup of a global or a persistent
object is refused, and the dump cannot make the loader run code.
"""

from __future__ import annotations

import io
import pickle
from typing import Any


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle asked for something other than plain containers and scalars."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise UnsafePickleError(f"refused to load {module}.{name}: only plain data is allowed")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("refused a persistent reference: only plain data is allowed")


def loads_plain(data: bytes) -> Any:
    """Unpickle ``data`` if it holds only plain containers; raise ``UnpicklingError`` otherwise."""
    try:
        return _PlainUnpickler(io.BytesIO(data)).load()
    except pickle.UnpicklingError:
        raise
    except (EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError) as exc:
        raise pickle.UnpicklingError(f"not a readable pickle: {exc}") from None
