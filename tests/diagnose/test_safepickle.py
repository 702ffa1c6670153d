"""The restricted unpickler builds plain data and refuses everything else."""

from __future__ import annotations

import collections
import os
import pickle

import pytest

from fsdp_skill.diagnose.safepickle import UnsafePickleError, loads_plain


def test_plain_containers_load():
    data = {"entries": [{"sizes": [[4, 2]], "name": ("0", "default_pg"), "x": None}], "v": 1.5}
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert loads_plain(pickle.dumps(data, protocol=protocol)) == data


def test_code_execution_is_refused(tmp_path):
    marker = tmp_path / "ran"

    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    with pytest.raises(UnsafePickleError, match="refused to load"):
        loads_plain(pickle.dumps({"entries": [Exploit()]}))
    assert not marker.exists()


@pytest.mark.parametrize(
    "obj", [collections.OrderedDict(a=1), {1, 2}, complex(1, 2), range(3)], ids=repr
)
def test_any_class_lookup_is_refused(obj):
    with pytest.raises(pickle.UnpicklingError):
        loads_plain(pickle.dumps(obj, protocol=2))


def test_garbage_is_an_unpickling_error():
    with pytest.raises(pickle.UnpicklingError):
        loads_plain(b"\x80\x04\x95garbage")
    with pytest.raises(pickle.UnpicklingError):
        loads_plain(b"")
