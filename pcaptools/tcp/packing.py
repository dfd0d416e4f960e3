"""Packing the parsers of an idle connection: a connection whose payload a parser reads (TLS,
HTTP/1, HTTP/2, WebSocket) keeps its parsers' state (keys and record numbers, HPACK tables,
half-parsed messages, the reassemblers) for as long as it is open. A connection that went
idle (no packet for :attr:`~.frozen.FreezePolicy.idle_ns` of capture time) gets that state
packed into one ``bytes`` object, and the same objects with the same values are made again
when a segment of the connection comes, or at the end of the capture. Nothing is lost, so no
row changes (``tests/tcp/test_frozen.py`` packs every connection before each segment).

The packed form is a :mod:`pickle` of the connection's byte-stream state, with two rules that
make it safe:

* **Shared objects are referred to, never copied.** An object shared by many connections (the
  :class:`~pcaptools.diagnostics.Diagnostics` sink, the key log and its sessions' secrets,
  DNS's transaction table) says so with a class attribute ``_packing_ = "shared"``;
  the packer keeps such an object and writes its number instead (:func:`_shared`), so that
  the connection, once unpacked, reports to and reads from the same object as every other.
* **Only known objects are packed.** An object of a class outside pcaptools, ``hpack`` and
  Python's own containers (a plugin's observer, a C library's state) makes the packer give
  up, unless its class says ``_packing_ = "packable"``; so does an object pickle cannot
  pack (a live ``zlib`` decompressor: a WebSocket with permessage-deflate, an RC4 cipher).
  The connection then keeps its live state, as before. A plugin opts in by marking its
  classes (and marking the objects it shares with other connections as shared).

Where the packed state goes: into the connection's frozen record (``Connection.packed``),
which ``load(out=DIR)`` moves to a temporary database on disk with the others; but a state
that holds TLS state (a class marked ``_packing_ = "secret"``: the TLS observer and its
decryptors, which hold traffic keys) stays in the tracker's memory, so that no key derived
from the key log is ever written to disk.
"""

from __future__ import annotations

import io
import pickle
import types
from typing import Any

__all__ = ["StreamPacker"]

#: modules whose classes may be packed (by the class's ``__module__``, or its package)
_PACKABLE_MODULES = ("builtins", "collections", "functools", "array", "enum",
                     "encodings.utf_8",  # (an incremental decoder: its bytes held)
                     # (block cipher algorithms: a key, made again from it)
                     "cryptography.hazmat.primitives.ciphers.algorithms",
                     "cryptography.hazmat.decrepit.ciphers.algorithms")
_PACKABLE_PACKAGES = ("pcaptools.", "hpack.")
#: objects pickle stores by name, not by value (a function, a class, a method's function)
_BY_NAME = (type, types.FunctionType, types.BuiltinFunctionType)


class _Refused(Exception):
    """An object the packer does not pack (see the module's docstring)."""


_PLAIN, _SHARED, _SECRET, _REFUSED = range(4)
_KINDS: dict[type, int] = {}
"""class -> what the packer does with its objects (worked out once per class: the pickler asks
for every object it packs)"""


def _kind(cls: type) -> int:
    mark = getattr(cls, "_packing_", None)
    if mark == "shared":
        kind = _SHARED
    elif mark == "secret":
        kind = _SECRET
    else:
        mod = cls.__module__
        known = (mod in _PACKABLE_MODULES or mod.startswith(_PACKABLE_PACKAGES)
                 or mark == "packable" or issubclass(cls, _BY_NAME)
                 or cls.__name__ == "cython_function_or_method")
        kind = _PLAIN if known else _REFUSED
    _KINDS[cls] = kind
    return kind


class _Pickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, packer: StreamPacker) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._packer = packer

    def reducer_override(self, obj: Any) -> Any:
        """(Asked once for every object packed but numbers, strings and Python's own
        containers: a shared one goes as its number, :func:`_shared`.)"""
        cls = type(obj)
        kind = _KINDS.get(cls)
        if kind is None:
            kind = _kind(cls)
        if kind == _PLAIN:
            return NotImplemented
        if kind == _SHARED:
            return _shared, (self._packer._share(obj),)
        if kind == _SECRET:
            self._packer.secret = True
            return NotImplemented
        raise _Refused(f"{cls.__module__}.{cls.__qualname__}")


def _shared(n: int) -> Any:
    """Stands for shared object number ``n`` in a packed state; :class:`_Unpickler` gives the
    object instead of this function."""
    raise AssertionError("only an _Unpickler makes a packed state again")


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, shared: list[Any]) -> None:
        super().__init__(file)
        self._shared = shared

    def find_class(self, module: str, name: str) -> Any:
        if name == "_shared" and module == __name__:
            return self._shared.__getitem__
        return super().find_class(module, name)


class StreamPacker:
    """Packs byte-stream state into ``bytes`` (:meth:`pack`) and makes it again
    (:meth:`unpack`), one per tracker: it holds the shared objects the packed states refer
    to (a handful: they are alive anyway)."""

    __slots__ = ("_ids", "_shared", "refused", "secret")

    def __init__(self) -> None:
        self._shared: list[Any] = []
        self._ids: dict[int, int] = {}
        self.refused: dict[str, int] = {}
        """why packing gave up, by the class that stopped it: how many times"""
        self.secret = False
        """the last state packed holds an object of a class marked ``_packing_ = "secret"``
        (TLS state: keys, traffic secrets): the caller keeps it in memory, off disk"""

    def _share(self, obj: Any) -> int:
        n = self._ids.get(id(obj))
        if n is None:  # (kept in _shared: its id cannot be reused while it is)
            n = self._ids[id(obj)] = len(self._shared)
            self._shared.append(obj)
        return n

    def pack(self, state: Any) -> bytes | None:
        """``state`` packed, or None when it holds an object that is not packed (the caller
        keeps it live)."""
        buf = io.BytesIO()
        self.secret = False
        try:
            _Pickler(buf, self).dump(state)
        except _Refused as e:
            why = str(e)
        except Exception as e:  # (pickle's own refusals, and any __reduce__'s: kept live)
            why = f"{type(e).__name__}: {str(e)[:80]}"
        else:
            return buf.getvalue()
        self.refused[why] = self.refused.get(why, 0) + 1
        return None

    def unpack(self, blob: bytes) -> Any:
        """The state :meth:`pack` packed, as new objects (the shared ones: the same)."""
        return _Unpickler(io.BytesIO(blob), self._shared).load()
