"""HTTP content codings (``Content-Encoding``), decoded as the body arrives.

:class:`ContentDecoder` undoes the codings of one message body (RFC 9110 §8.4) incrementally:
``feed(wire_bytes)`` returns the decoded bytes those wire bytes made available, so an SSE
event the server flushed is parsed when its packet arrives (its ``ts`` is the packet's, not
the end of the body's). Codings:

- ``gzip`` / ``x-gzip`` (RFC 1952; concatenated members are decoded one after the other);
- ``deflate``: the zlib format of RFC 9110 (RFC 1950), and the raw RFC 1951 stream that
  many servers send instead (told apart by the zlib header check, as browsers do);
- ``br`` (RFC 7932, the ``brotli`` package);
- ``zstd`` (RFC 8878, the ``zstandard`` package; window up to 8 MiB as RFC 9659 asks;
  concatenated frames decoded one after the other);
- ``identity`` (nothing to do).

Stacked codings (``Content-Encoding: gzip, br``: gzip applied first) are undone in reverse
order. An unknown coding leaves the body undecoded (``status`` ``unsupported``).

A watcher, not a participant: it never raises on wire data. ``status`` says what happened:

- ``decoding``: in progress; ``decoded``: every coding's stream ended properly;
- ``corrupt``: a coding's stream is damaged; the bytes decoded before the damage were
  returned, nothing after it is decoded;
- ``truncated``: the body ended before a coding's stream did (the bytes decoded so far
  were returned);
- ``gap``: wire bytes were lost (a capture gap); a compressed stream cannot be resumed, so
  the rest of the body is not decoded;
- ``limit``: the decoded size reached ``max_decoded_bytes`` (a guard against decompression
  bombs); decoding stopped there;
- ``unsupported``: a coding pcaptools does not decode.

``problem`` holds the detail (for the warning row) once the status is one of the last five.
"""

from __future__ import annotations

import functools
import importlib
import zlib
from collections.abc import Iterable
from typing import Any

__all__ = [
    "DEFAULT_MAX_DECODED_BYTES",
    "SUPPORTED_CODINGS",
    "ContentDecoder",
    "parse_content_encoding",
]

#: default bound on the decoded bytes of one body (and on every stage of a stacked coding)
DEFAULT_MAX_DECODED_BYTES = 64 << 20

SUPPORTED_CODINGS = ("gzip", "x-gzip", "deflate", "br", "zstd", "identity")
"""the codings :class:`ContentDecoder` undoes (``identity`` is nothing to undo)"""

_ZSTD_MAX_WINDOW = 8 << 20
"""RFC 9659 §3: a zstd content coding uses a window of at most 8 MiB"""
_ZSTD_SLICE = 1024
"""zstd input is fed in slices this long, so one call cannot expand past ~32 MiB (a 128 KiB
RLE block costs 4 bytes) before the output bound is checked"""


@functools.cache
def _decompressor(module: str) -> Any:
    """The module ``brotli`` or ``zstandard``, imported by the first body in its coding (most
    loads have none); None when it is not installed (the coding is then unsupported)."""
    try:
        return importlib.import_module(module)
    except ImportError:  # pragma: no cover - brotli and zstandard are dependencies
        return None


def parse_content_encoding(values: Iterable[str]) -> tuple[str, ...]:
    """The codings of ``Content-Encoding`` header values (every field line, in wire order),
    lower-cased, in the order they were applied; ``identity`` and empty items dropped."""
    out: list[str] = []
    for v in values:
        for item in v.split(","):
            c = item.strip().lower()
            if c and c != "identity":
                out.append(c)
    return tuple(out)


class _Damaged(Exception):
    """A coding's stream is corrupt (raised in a stage, caught in ContentDecoder.feed)."""


class _Stage:
    """One coding being undone. ``run(data, budget)`` returns decoded bytes; more than
    ``budget`` of them means the bound was reached (the caller stops there)."""

    __slots__ = ("ended", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.ended = False
        """the coding's stream reached its proper end"""

    def run(self, data: bytes, budget: int) -> bytes:  # pragma: no cover - abstract
        raise NotImplementedError


class _Zlib(_Stage):
    """gzip (members one after the other) and deflate (zlib or raw, decided on the first
    two bytes)."""

    __slots__ = ("_d", "_head", "_wbits")

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._wbits = 31 if name != "deflate" else 0  # 0: not decided yet
        self._d: Any = zlib.decompressobj(31) if self._wbits else None
        self._head = b""

    def run(self, data: bytes, budget: int) -> bytes:
        if self._d is None:
            head = self._head + data
            if len(head) < 2:
                self._head = head
                return b""
            self._head = b""
            data = head
            cmf, flg = head[0], head[1]
            if head[:2] == b"\x1f\x8b":
                self._wbits = 31  # gzip sent as "deflate"
            elif cmf & 0x0F == 8 and cmf >> 4 <= 7 and (cmf << 8 | flg) % 31 == 0:
                self._wbits = 15  # zlib (RFC 1950), what RFC 9110 means by deflate
            else:
                self._wbits = -15  # raw deflate, what many servers send
            self._d = zlib.decompressobj(self._wbits)
        parts: list[bytes] = []
        total = 0
        while data:
            if self.ended:
                if self._wbits == 31 and data[:1] == b"\x1f":  # another gzip member
                    self._d = zlib.decompressobj(31)
                    self.ended = False
                else:
                    break  # bytes after the end of the stream: ignored, as browsers do
            try:
                piece = self._d.decompress(data, budget + 1 - total)
            except zlib.error as exc:
                raise _Damaged(f"{self.name}: {exc}") from None
            parts.append(piece)
            total += len(piece)
            if total > budget:
                break
            if self._d.eof:
                self.ended = True
                data = self._d.unused_data
            else:
                data = b""  # max_length not reached: every input byte was consumed
        return parts[0] if len(parts) == 1 else b"".join(parts)


class _Brotli(_Stage):
    __slots__ = ("_d", "_error")

    def __init__(self, name: str) -> None:
        super().__init__(name)
        brotli = _decompressor("brotli")
        self._d: Any = brotli.Decompressor()
        self._error: type[Exception] = brotli.error

    def run(self, data: bytes, budget: int) -> bytes:
        if self.ended or not data:
            return b""
        try:
            out = bytes(self._d.process(data, output_buffer_limit=budget + 1))
        except self._error as exc:
            raise _Damaged(f"br: {exc}") from None
        if self._d.is_finished():
            self.ended = True
        return out


class _Zstd(_Stage):
    __slots__ = ("_d", "_dctx", "_error")

    def __init__(self, name: str) -> None:
        super().__init__(name)
        zstandard = _decompressor("zstandard")
        self._dctx: Any = zstandard.ZstdDecompressor(max_window_size=_ZSTD_MAX_WINDOW)
        self._error: type[Exception] = zstandard.ZstdError
        self._d: Any = self._dctx.decompressobj()

    def run(self, data: bytes, budget: int) -> bytes:
        parts: list[bytes] = []
        total = 0
        pos = 0
        n = len(data)
        while pos < n:
            if self.ended:  # another frame follows (frames are decoded one after the other)
                self._d = self._dctx.decompressobj()
                self.ended = False
            piece = data[pos : pos + _ZSTD_SLICE] if n > _ZSTD_SLICE else data
            pos += len(piece)
            try:
                out = bytes(self._d.decompress(piece))
            except self._error as exc:
                raise _Damaged(f"zstd: {exc}") from None
            parts.append(out)
            total += len(out)
            if total > budget:
                break
            if self._d.eof:
                self.ended = True
                rest = self._d.unused_data
                if rest:
                    data = rest + data[pos:]
                    pos, n = 0, len(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)


def _stage(name: str) -> _Stage | None:
    if name in ("gzip", "x-gzip", "deflate"):
        return _Zlib(name)
    if name == "br" and _decompressor("brotli") is not None:
        return _Brotli(name)
    if name == "zstd" and _decompressor("zstandard") is not None:
        return _Zstd(name)
    return None


class ContentDecoder:
    """Undo the content codings of one body, incrementally. Never raises on wire data.

    ``codings`` in the order they were applied (:func:`parse_content_encoding`);
    ``max_decoded_bytes`` bounds the decoded bytes (and those of every intermediate stage).
    """

    __slots__ = ("_max", "_stages", "codings", "decoded_bytes", "problem", "status", "wire_bytes")

    def __init__(
        self, codings: tuple[str, ...], *, max_decoded_bytes: int = DEFAULT_MAX_DECODED_BYTES
    ) -> None:
        self.codings = codings
        self._max = max_decoded_bytes
        self.wire_bytes = 0
        """bytes given to :meth:`feed` (lost bytes included, see :meth:`lose`)"""
        self.decoded_bytes = 0
        """decoded bytes returned so far"""
        self.problem: str | None = None
        self.status = "decoding"
        stages: list[_Stage] = []
        for name in reversed(codings):
            st = _stage(name)
            if st is None:
                self.status = "unsupported"
                self.problem = f"content coding {name!r} is not decoded"
                stages = []
                break
            stages.append(st)
        self._stages = stages

    @property
    def active(self) -> bool:
        """True while bytes are still being decoded"""
        return self.status == "decoding"

    def feed(self, data: bytes) -> bytes:
        """The next wire bytes of the body -> the decoded bytes they made available (empty
        once decoding stopped: see :attr:`status`)."""
        self.wire_bytes += len(data)
        if self.status != "decoding" or not data:
            return b""
        budget = self._max - self.decoded_bytes
        out = data
        try:
            for st in self._stages:
                out = st.run(out, budget)
                if len(out) > budget:
                    self.status = "limit"
                    self.problem = (
                        f"decoding stopped at {self._max} decoded bytes "
                        f"(after {self.wire_bytes} wire bytes)"
                    )
                    out = out[:budget]
                    break
                if not out:
                    break
        except _Damaged as exc:
            self.status = "corrupt"
            self.problem = (
                f"{exc} after {self.wire_bytes - len(data)} wire bytes "
                f"({self.decoded_bytes} decoded bytes kept)"
            )
            return b""
        self.decoded_bytes += len(out)
        return out

    def lose(self, nbytes: int) -> None:
        """``nbytes`` of the body were never captured (0: an unknown number): the rest
        cannot be decoded."""
        self.wire_bytes += nbytes
        if self.status == "decoding":
            self.status = "gap"
            lost = (
                f"{nbytes} body bytes were not captured"
                if nbytes
                else "bytes of the connection were not captured while the body was open"
            )
            self.problem = (
                f"{lost} (after {self.wire_bytes - nbytes} wire bytes); the rest of the body "
                f"is not decoded ({self.decoded_bytes} decoded bytes kept)"
            )

    def end(self) -> str:
        """The body ended. Returns the final :attr:`status` (``truncated`` when a coding's
        stream had not ended)."""
        if self.status == "decoding":
            open_stage = next((st for st in self._stages if not st.ended), None)
            if open_stage is None:
                self.status = "decoded"
            else:
                self.status = "truncated"
                self.problem = (
                    f"the body ended ({self.wire_bytes} wire bytes) before the end of its "
                    f"{open_stage.name} stream ({self.decoded_bytes} decoded bytes kept)"
                )
        return self.status
