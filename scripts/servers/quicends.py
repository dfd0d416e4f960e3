"""QUIC connections that end in every way a capture can show (aioquic): for the QUIC
disconnect verdicts of ``pcaptools.analyses.disconnects`` and the QUIC PING heartbeats.

Run inside namespaces (the recorder does this through ``ip netns exec``)::

    python quicends.py serve --listen 192.0.2.20:443 --cert C.pem --key K.pem \
        --events E.jsonl --lifetime 60
    python quicends.py client --connect 192.0.2.20:443 --host lab.test --cacert C.pem \
        --cases app_error,transport_error,... --out RESULT.json --keylog KEYS.txt \
        --deadline 40 [--unanswered-port 4433]

ALPN ``pcaptools-lab`` (a lab protocol, not HTTP/3: one bidirectional stream, text lines).
The client opens one connection per case, one after the other, each from its own local port
(50460 + the case's position), and writes ``mode <case>\\n`` on stream 0; the server answers
``ok <case>\\n`` and then ends the connection the way the case says:

- ``clean``: the client closes with NO_ERROR (0x0) after the answer;
- ``app_error``: the client closes with application error 0x2a, reason ``client gave up``;
- ``transport_error``: the server closes with PROTOCOL_VIOLATION (0x0a, frame type 0x08),
  reason ``lab: protocol violation``;
- ``alpn_mismatch``: the client offers ALPN ``nope``: the server's TLS stack refuses the
  handshake (CRYPTO_ERROR no_application_protocol, 0x178);
- ``unanswered``: the client sends its Initial to ``--unanswered-port``, where nothing
  listens (ICMP port unreachable comes back); it gives up after its 2 s idle timeout;
- ``idle``: the client announces max_idle_timeout 1000 ms and, after the answer, sends
  nothing: both ends drop the connection silently when the timeout expires;
- ``vanish``: after its answer the server drops every later datagram of the connection
  (a dead peer, as seen from the client); the client sends one more line, retransmits it
  on PTO with exponential backoff, and gives up when its 3 s idle timeout expires;
- ``reset``: after its answer the server forgets the connection and answers each of the
  next 3 datagrams of it with a stateless reset (RFC 9000 §10.3) carrying the token it
  issued for the destination connection ID; the client (aioquic does not detect resets)
  retransmits until its 2 s idle timeout;
- ``ping``: the client sends a PING frame every 300 ms (each answered by an ACK) for
  ``--ping-s`` seconds, then closes with NO_ERROR.

RESULT.json: per case its local port, connection IDs, and the times (ns, CLOCK_REALTIME) of
the request, the answer, the close or the last send and every PING, and every expiry of
aioquic's loss detection timer (``timers``: ``pto`` or ``loss``, with aioquic's PTO count);
the server's events file logs per connection the case, the answer time, every datagram
dropped or answered with a reset (time, length, token) and its timer expiries. The TLS key
log is appended to ``--keylog``.

Bounded: the server exits after ``--lifetime`` s, each case has a 10 s timeout and the
whole run ``--deadline`` s. Loopback / lab namespaces only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from aioquic.asyncio import QuicConnectionProtocol, connect, serve
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, QuicEvent, StreamDataReceived

ALPN = "pcaptools-lab"
CASES = ("clean", "app_error", "transport_error", "alpn_mismatch", "unanswered", "idle",
         "vanish", "reset", "ping")
CASE_TIMEOUT_S = 10.0
MAX_RESETS = 3


def now_ns() -> int:
    return time.time_ns()


def watch_timers(quic: Any, log: list[dict[str, Any]]) -> None:
    """Log every expiry of ``quic``'s loss detection timer (aioquic's own view): ``pto`` when
    no packet was waiting for the time threshold (a probe timeout, RFC 9002 §6.2: its probes
    follow), ``loss`` otherwise (time-threshold loss detection, §6.1.2)."""
    loss = quic._loss
    orig = loss.on_loss_detection_timeout

    def expired(*, now: float) -> None:
        kind = "loss" if loss._get_loss_space() is not None else "pto"
        orig(now=now)
        log.append({"t_ns": now_ns(), "timer": kind, "pto_count": loss._pto_count})

    loss.on_loss_detection_timeout = expired


class Events:
    def __init__(self, path: Path) -> None:
        self.fh = path.open("a")

    def log(self, what: str, **kw: Any) -> None:
        self.fh.write(json.dumps({"t_ns": now_ns(), "what": what, **kw}) + "\n")
        self.fh.flush()


class LabServer(QuicConnectionProtocol):
    """One server connection: answers ``mode <case>``, then does what the case says."""

    events: Events

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.case: str | None = None
        self.dropping = False
        self.resetting = False
        self.resets = 0
        self.timers: list[dict[str, Any]] = []
        watch_timers(self._quic, self.timers)

    def datagram_received(self, data: bytes | str, addr: Any) -> None:
        raw = bytes(data)
        if self.dropping:
            self.events.log("dropped", case=self.case, length=len(raw))
            return
        if self.resetting:
            if self.resets < MAX_RESETS and raw and not raw[0] & 0x80:
                token = self._token(raw)
                if token is not None:
                    size = max(21, min(len(raw) - 1, 43))
                    reset = bytes([0x40 | (os.urandom(1)[0] & 0x3F)]) + os.urandom(size - 17)
                    reset += token
                    self._transport.sendto(reset, addr)  # type: ignore[union-attr]
                    self.resets += 1
                    self.events.log("stateless_reset_sent", case=self.case, length=len(reset),
                                    token=token.hex(), trigger_length=len(raw))
                    return
            self.events.log("ignored", case=self.case, length=len(raw))
            return
        super().datagram_received(data, addr)

    def transmit(self) -> None:
        if self.dropping or self.resetting:
            return  # the connection is gone at this end: nothing more is sent for it
        super().transmit()

    def _token(self, raw: bytes) -> bytes | None:
        for cid in self._quic._host_cids:  # the connection IDs this server issued
            if raw[1:1 + len(cid.cid)] == cid.cid:
                return bytes(cid.stateless_reset_token)
        return None

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, StreamDataReceived) and self.case is None:
            text = event.data.decode("ascii", "replace").strip()
            if not text.startswith("mode "):
                return
            self.case = text[5:]
            self._quic.send_stream_data(event.stream_id, f"ok {self.case}\n".encode())
            self.transmit()
            self.events.log("answered", case=self.case, stream_id=event.stream_id)
            if self.case == "transport_error":
                self._quic.close(error_code=0x0A, frame_type=0x08,
                                 reason_phrase="lab: protocol violation")
                self.transmit()
                self.events.log("closed", case=self.case, error_code=0x0A, space="transport")
            elif self.case == "vanish":
                self.dropping = True  # after this answer, nothing in or out
            elif self.case == "reset":
                self.resetting = True
        elif isinstance(event, ConnectionTerminated):
            self.events.log("terminated", case=self.case, error_code=event.error_code,
                            reason=event.reason_phrase, timers=self.timers,
                            dcid=self._quic.original_destination_connection_id.hex())


async def serve_main(args: argparse.Namespace) -> None:
    host, port = args.listen.rsplit(":", 1)
    events = Events(Path(args.events))
    LabServer.events = events
    cfg = QuicConfiguration(is_client=False, alpn_protocols=[ALPN], idle_timeout=30.0)
    cfg.load_cert_chain(args.cert, args.key)
    server = await serve(host, int(port), configuration=cfg, create_protocol=LabServer)
    events.log("listening", listen=args.listen)
    try:
        await asyncio.sleep(args.lifetime)
    finally:
        server.close()


class LabClient(QuicConnectionProtocol):
    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.terminated: dict[str, Any] | None = None
        self.timers: list[dict[str, Any]] = []
        watch_timers(self._quic, self.timers)

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, StreamDataReceived) and not self.answer.done():
            self.answer.set_result(event.data.decode("ascii", "replace").strip())
        elif isinstance(event, ConnectionTerminated):
            self.terminated = {"t_ns": now_ns(), "error_code": event.error_code,
                               "frame_type": event.frame_type, "reason": event.reason_phrase}
            if not self.answer.done():
                self.answer.set_exception(ConnectionError("terminated"))


async def one_case(args: argparse.Namespace, case: str, local_port: int) -> dict[str, Any]:
    host, port = args.connect.rsplit(":", 1)
    idle = {"idle": 1.0, "vanish": 3.0, "reset": 2.0, "unanswered": 2.0}.get(case, 30.0)
    cfg = QuicConfiguration(is_client=True, alpn_protocols=["nope" if case == "alpn_mismatch"
                                                            else ALPN],
                            server_name=args.host, idle_timeout=idle)
    cfg.load_verify_locations(args.cacert)
    cfg.secrets_log_file = open(args.keylog, "a")  # noqa: SIM115 (closed below)
    out: dict[str, Any] = {"case": case, "local_port": local_port, "idle_timeout_s": idle,
                           "t_start_ns": now_ns()}
    timers: list[dict[str, Any]] = []
    dport = int(args.unanswered_port) if case == "unanswered" else int(port)
    try:
        async with connect(host, dport, configuration=cfg, create_protocol=LabClient,
                           local_port=local_port, wait_connected=False) as p:
            assert isinstance(p, LabClient)
            timers = p.timers
            p.transmit()  # the first Initial (connect() held it back: wait_connected=False)
            q = p._quic
            out["original_dcid"] = q.original_destination_connection_id.hex()
            out["client_scid"] = q.host_cid.hex()
            try:
                await asyncio.wait_for(p.wait_connected(), timeout=idle + 1.0)
            except (TimeoutError, ConnectionError) as exc:
                out["handshake"] = f"failed: {type(exc).__name__}"
                out["terminated"] = p.terminated
                out["timers"] = p.timers
                await asyncio.sleep(0.3)
                out["t_end_ns"] = now_ns()
                return out
            out["handshake"] = "completed"
            out["server_cid"] = q._peer_cid.cid.hex()
            sid = q.get_next_available_stream_id()
            q.send_stream_data(sid, f"mode {case}\n".encode())
            p.transmit()
            out["t_request_ns"] = now_ns()
            try:
                out["answer"] = await asyncio.wait_for(asyncio.shield(p.answer), 3.0)
                out["t_answer_ns"] = now_ns()
            except (TimeoutError, ConnectionError):
                out["answer"] = None
            await _finish(p, case, sid, out, args)
    except (ConnectionError, OSError) as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        cfg.secrets_log_file.close()
    out["t_end_ns"] = now_ns()
    out["timers"] = timers
    return out


async def _finish(p: LabClient, case: str, sid: int, out: dict[str, Any],
                  args: argparse.Namespace) -> None:
    q = p._quic
    if case == "clean":
        q.close(error_code=0)
        p.transmit()
        out["t_close_ns"] = now_ns()
        await asyncio.sleep(0.3)
    elif case == "app_error":
        q.close(error_code=0x2A, reason_phrase="client gave up")
        p.transmit()
        out["t_close_ns"] = now_ns()
        await asyncio.sleep(0.3)
    elif case == "transport_error":
        await asyncio.sleep(0.5)
    elif case == "idle":
        await asyncio.sleep(2.5)  # nothing sent: both idle timers (1 s) expire
    elif case in ("vanish", "reset"):
        await asyncio.sleep(0.2)
        q.send_stream_data(sid, b"are you there?\n")
        p.transmit()
        out["t_last_request_ns"] = now_ns()
        limit = time.monotonic() + CASE_TIMEOUT_S
        while p.terminated is None and time.monotonic() < limit:
            await asyncio.sleep(0.05)  # PTO probes until the idle timeout ends it
    elif case == "ping":
        pings: list[int] = []
        end = time.monotonic() + args.ping_s
        while time.monotonic() < end:
            pings.append(now_ns())
            with contextlib.suppress(asyncio.TimeoutError, ConnectionError):
                await asyncio.wait_for(p.ping(), 1.0)
            await asyncio.sleep(0.3)
        out["t_pings_ns"] = pings
        q.close(error_code=0)
        p.transmit()
        out["t_close_ns"] = now_ns()
        await asyncio.sleep(0.3)
    out["terminated"] = p.terminated


async def client_main(args: argparse.Namespace) -> dict[str, Any]:
    cases = [c for c in args.cases.split(",") if c]
    res: dict[str, Any] = {"cases": []}
    deadline = time.monotonic() + args.deadline
    for i, case in enumerate(cases):
        if case not in CASES or time.monotonic() > deadline:
            continue
        try:
            r = await asyncio.wait_for(one_case(args, case, 50460 + i), CASE_TIMEOUT_S)
        except TimeoutError:
            r = {"case": case, "local_port": 50460 + i, "error": "case timeout"}
        res["cases"].append(r)
        Path(args.out).write_text(json.dumps(res, indent=1))
        await asyncio.sleep(0.2)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--listen", required=True)
    s.add_argument("--cert", required=True)
    s.add_argument("--key", required=True)
    s.add_argument("--events", required=True)
    s.add_argument("--lifetime", type=float, default=60.0)
    c = sub.add_parser("client")
    c.add_argument("--connect", required=True)
    c.add_argument("--host", required=True)
    c.add_argument("--cacert", required=True)
    c.add_argument("--cases", default=",".join(CASES))
    c.add_argument("--out", required=True)
    c.add_argument("--keylog", required=True)
    c.add_argument("--deadline", type=float, default=40.0)
    c.add_argument("--unanswered-port", default="4433")
    c.add_argument("--ping-s", type=float, default=1.5)
    args = ap.parse_args(argv)
    if args.cmd == "serve":
        asyncio.run(serve_main(args))
        return 0
    try:
        res = asyncio.run(asyncio.wait_for(client_main(args), args.deadline + 5))
    except TimeoutError:
        res = {"error": "deadline"}
    import aioquic

    res["aioquic"] = aioquic.__version__
    Path(args.out).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
