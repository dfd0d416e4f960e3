"""Zeek's TCP connection state (``conn_state``) and ``history`` string, for the connections table.

This is a Python re-statement of what Zeek does (zeek/zeek: ``scripts/base/protocols/conn/
main.zeek`` ``conn_state()`` and the ``history`` doc comment; ``src/packet_analysis/protocol/
tcp/TCPSessionAdapter.cc`` ``update_history`` and ``UpdateStateMachine``; ``src/analyzer/
protocol/tcp/TCP_Endpoint.cc`` and ``src/Conn.cc`` ``CheckHistory`` / ``ScaledHistoryEntry``;
``TCP_Reassembler::Gap``). Each endpoint runs Zeek's state machine (INACTIVE, SYN_SENT,
SYN_ACK_SENT, PARTIAL, ESTABLISHED, CLOSED, RESET); ``conn_state()`` maps the two final
states exactly as ``main.zeek`` does.

History letters (originator, i.e. client, upper case; responder lower case):

====  =================================================================  ==================
S     SYN without ACK                                                    once *
H     SYN+ACK                                                            once *
A     pure ACK (no SYN/FIN/RST, no payload)                              once
D     payload (no SYN/FIN/RST)                                           once
F     FIN (exactly one of SYN/FIN/RST set)                               once *
R     RST (exactly one of SYN/FIN/RST set)                               once *
I     FIN+RST in one packet                                              once
Q     SYN+FIN or SYN+RST                                                 once
C     bad checksum (the packet is otherwise ignored, as in Zeek)         1, 10, 100, ...
T     retransmitted payload                                              1, 10, 100, ...
W     zero window advertised                                             1, 10, 100, ...
G     content gap (only while both endpoints are cleanly established)   1, 10, 100, ...
^     roles flipped                                                      see below
X     an analysis limit was reached (conn_log only)                      once
====  =================================================================  ==================

"once *": S, H, F and R are logged again when the packet's sequence number differs from
that of the previous packet of the same kind from that side (pass ``seq`` to get this;
for S/H Zeek re-bases the endpoint's sequence numbers on every new SYN while the
connection is open, so in practice they repeat only after that side closed or reset).
"1, 10, 100, ...": the letter is logged at the 1st, 10th, 100th, 1000th ... occurrence
(``ScaledHistoryEntry``, base 10). A, D, I, Q are logged at most once per direction.
Zeek's ``X`` (an analysis limit reached) is logged by :meth:`ConnHistory.analysis_limit`
(``analyses.conn_log`` calls it; the ``connections`` table does not).

Roles and ``^``: Zeek's originator is the sender of the first packet unless its
heuristic (likely server ports) flips the roles when that packet is not a pure SYN, or
a SYN arrives that shows a captured SYN-ACK came first; either flip appends ``^``. Here
the caller decides the roles (client = SYN sender, or the guess when no SYN was seen)
and the history is always expressed relative to them: when the *first* packet comes
from the server, ``^`` is logged first, which is what Zeek does when its flip agrees
with the caller's roles (the usual case: a server port below 1024 or a known service
port). ``client_inferred`` does not change the letters (Zeek's port heuristic is the
same kind of guess); it is kept for the caller. A later SYN that contradicts an
inferred role is not a flip in Zeek either (it starts a new connection there), so no
``^`` is logged for it; a caller that swaps its client/server labels mid-connection
calls :meth:`ConnHistory.flip_roles`, which does what Zeek's ``FlipRoles`` does.

Inputs the caller derives from tshark's analysis: ``retransmission`` (tshark's
retransmission flags; Zeek's ``T`` is "payload not beyond the highest sequence number
seen", which also covers out-of-order segments: a known difference), ``zero_window``
(pass True whenever the window field is 0; Zeek's conditions are applied here),
``bad_checksum`` (only if the caller validates checksums: tshark does not by default,
Zeek does unless run with ``-C``), ``gap`` / :meth:`ConnHistory.content_gap` (from the
reassembler's gaps). Zeek's timers (a connection attempt that stays unanswered for
5 s, or closed connections lingering) can split what is one connection here into
several Zeek connections; that is the connection tracker's business, not this class's.
Zeek's ``orig_bytes``/``resp_bytes`` (used by ``conn_state`` only to tell REJ from
other double resets) are approximated by the payload bytes each side sent.
"""

from __future__ import annotations

import re

from ..net.packet import ACK, FIN, RST, SYN

__all__ = ["CONN_STATES", "ConnHistory"]

#: every value conn_state() can return, in main.zeek's documentation order
CONN_STATES = (
    "S0",
    "S1",
    "SF",
    "REJ",
    "S2",
    "S3",
    "RSTO",
    "RSTR",
    "RSTOS0",
    "RSTRH",
    "SH",
    "SHR",
    "OTH",
)

# Zeek's TCP_ENDPOINT_* states
INACTIVE, SYN_SENT, SYN_ACK_SENT, PARTIAL, ESTABLISHED, CLOSED, RESET = range(7)
STATE_NAMES = ("INACTIVE", "SYN_SENT", "SYN_ACK_SENT", "PARTIAL", "ESTABLISHED", "CLOSED", "RESET")

# "seen once" bits (Zeek's HIST_* masks); the responder's are shifted left by 16
_H_SYN = 0x1
_H_FIN = 0x2
_H_RST = 0x4
_H_FIN_RST = 0x8
_H_DATA = 0x10
_H_ACK = 0x20
_H_MULTI = 0x40
_H_LIMIT = 0x80000000  # HIST_ANALYZER_LIMIT_REACHED: connection-wide, not per endpoint

# where each logarithmic letter's [count, next threshold] sits in _Endpoint.scaled
_CHK, _RXMT, _WIN0, _GAP = 0, 2, 4, 6

_RSTOS0 = re.compile(r"\^?S[^HAFGIQ]*R.*")


class _Endpoint:
    """One side's Zeek endpoint state (TCP_Endpoint), reduced to what history and conn_state use."""

    __slots__ = (
        "data_bytes",
        "last_fin",
        "last_rst",
        "last_syn",
        "prev_state",
        "scaled",
        "state",
    )

    def __init__(self) -> None:
        self.state = INACTIVE
        self.prev_state = INACTIVE
        self.data_bytes = 0
        self.last_syn: int | None = None
        self.last_fin: int | None = None
        self.last_rst: int | None = None
        self.scaled: list[int] | None = None
        """[count, next threshold] of each logarithmic letter (C, T, W, G: _CHK, _RXMT,
        _WIN0, _GAP), made at the first of them (most connections never log one)"""

    def set_state(self, new: int) -> None:
        if new != self.state:
            self.prev_state = self.state
            self.state = new

    def clean(self) -> bool:
        """Zeek's is_clean(): established, or closed straight from established."""
        return self.state == ESTABLISHED or (
            self.state == CLOSED and self.prev_state == ESTABLISHED
        )


class ConnHistory:
    """Zeek history string and conn_state of one TCP connection. See the module docstring.

    Call :meth:`packet` for every TCP segment of the connection, in capture order.
    Never raises on any flag combination or length.
    """

    __slots__ = ("_hist", "_orig", "_resp", "_seen", "_started", "client_inferred")

    def __init__(self, *, client_inferred: bool = False) -> None:
        self.client_inferred = client_inferred
        self._hist: list[str] = []
        self._seen = 0
        self._orig = _Endpoint()
        self._resp = _Endpoint()
        self._started = False

    # ------------------------------------------------------------------ input

    def packet(
        self,
        from_client: bool,
        flags: int,
        seg_len: int,
        *,
        retransmission: bool = False,
        zero_window: bool = False,
        bad_checksum: bool = False,
        gap: bool = False,
        seq: int | None = None,
    ) -> None:
        """Record one segment.

        ``flags``: the 9-bit TCP flags; ``seg_len``: payload length (tcp.len);
        ``gap``: a content gap in *this sender's* byte stream was found while processing
        the packet (gaps in the other direction: :meth:`content_gap`); ``seq``: the
        segment's sequence number in any per-direction consistent numbering (raw or
        relative), used only to log F/R/S/H again when it changes; None = unknown (not
        logged again).
        """
        if not self._started:
            self._started = True
            if not from_client:
                self._hist.append("^")
        if from_client:
            ep, peer, shift = self._orig, self._resp, 0
        else:
            ep, peer, shift = self._resp, self._orig, 16
        if bad_checksum:
            self._scaled(ep, _CHK, "C", from_client)
            return
        syn = flags & SYN != 0
        fin = flags & FIN != 0
        rst = flags & RST != 0
        ack = flags & ACK != 0

        # update_history()
        nbits = syn + fin + rst
        if nbits > 1:
            if fin and rst:
                self._once(_H_FIN_RST << shift, "I", from_client)
            else:
                self._once(_H_MULTI << shift, "Q", from_client)
        elif nbits == 1:
            if syn:
                code = "H" if ack else "S"
                if (
                    self._once(_H_SYN << shift, code, from_client)
                    and seq is not None
                    and ep.last_syn is not None
                    and seq != ep.last_syn
                    and (ep.state == CLOSED or (ep.state == RESET and ep.prev_state != INACTIVE))
                ):
                    self._add(code, from_client)
                ep.last_syn = seq
            elif fin:
                fin_seq = None if seq is None else seq + seg_len
                if (
                    self._once(_H_FIN << shift, "F", from_client)
                    and fin_seq is not None
                    and ep.last_fin is not None
                    and fin_seq != ep.last_fin
                ):
                    self._add("F", from_client)
                ep.last_fin = fin_seq
            else:
                if (
                    self._once(_H_RST << shift, "R", from_client)
                    and seq is not None
                    and ep.last_rst is not None
                    and seq != ep.last_rst
                ):
                    self._add("R", from_client)
                ep.last_rst = seq
        elif seg_len > 0:
            self._once(_H_DATA << shift, "D", from_client)
        elif ack:
            self._once(_H_ACK << shift, "A", from_client)

        # update_window(): zero windows are boring with or after a RST, or after the peer's FIN
        if zero_window and not rst and peer.state != CLOSED and ep.state != RESET:
            self._scaled(ep, _WIN0, "W", from_client)

        # update_last_seq(): retransmitted payload, not trusted once this side has reset
        if retransmission and seg_len > 0 and ep.state != RESET:
            self._scaled(ep, _RXMT, "T", from_client)

        if seg_len > 0 and not rst:
            ep.data_bytes += seg_len

        self._update_state(ep, peer, from_client, syn, fin, rst, ack, seg_len)

        if gap:
            self.content_gap(from_client)

    def plain(self, from_client: bool, flags: int, seg_len: int) -> None:
        """:meth:`packet` for a segment without SYN, FIN or RST that is not a retransmission
        and advertises a non-zero window (most segments): the same result, cheaper once the
        sender's D (payload) or A (pure ACK) letter has been logged."""
        if from_client:
            ep = self._orig
            shift = 0
        else:
            ep = self._resp
            shift = 16
        if ep.state != INACTIVE:  # (so a packet was seen before: _started is set)
            if seg_len > 0:
                if self._seen & (_H_DATA << shift):
                    ep.data_bytes += seg_len
                    return
            elif flags & ACK and self._seen & (_H_ACK << shift):
                return
        self.packet(from_client, flags, seg_len)

    def content_gap(self, client_stream: bool) -> None:
        """A content gap was found in the client's (True) or server's (False) byte stream.

        Logs G/g (logarithmically) only while both endpoints are established or closed
        straight from established, as Zeek's ``TCP_Reassembler::Gap`` does; call it after
        :meth:`packet` for the packet whose acknowledgement revealed the gap.
        """
        ep, peer = (self._orig, self._resp) if client_stream else (self._resp, self._orig)
        if ep.clean() and peer.clean():
            self._scaled(ep, _GAP, "G", client_stream)

    def analysis_limit(self) -> None:
        """A limit of the analysis was reached on this connection: Zeek's ``X`` (once, upper
        case whoever caused it: ``Connection::LimitReachedWeird`` in Zeek's ``src/Conn.cc``)."""
        if not self._seen & _H_LIMIT:
            self._seen |= _H_LIMIT
            self._hist.append("X")

    def flip_roles(self) -> None:
        """The caller swapped its client/server labels: do what Zeek's ``FlipRoles`` does.

        Appends ``^`` and swaps the endpoints' states; letters already logged keep their
        case, and (as in Zeek) the "seen once" bookkeeping stays with the upper/lower case
        letters, not with the hosts. Later :meth:`packet` calls use the new labels.
        """
        self._orig, self._resp = self._resp, self._orig
        self._hist.append("^")

    # ----------------------------------------------------------------- output

    @property
    def history(self) -> str:
        """Zeek history string: client letters upper case, server letters lower case."""
        return "".join(self._hist)

    @property
    def orig_state(self) -> str:
        """Zeek endpoint state of the client (``TCP_ENDPOINT_*`` without the prefix)."""
        return STATE_NAMES[self._orig.state]

    @property
    def resp_state(self) -> str:
        """Zeek endpoint state of the server."""
        return STATE_NAMES[self._resp.state]

    def conn_state(self) -> str:
        """Zeek conn_state from the two endpoint states, exactly as main.zeek's conn_state()."""
        o, r = self._orig, self._resp
        os_, rs = o.state, r.state
        o_inactive = os_ in (INACTIVE, PARTIAL)
        r_inactive = rs in (INACTIVE, PARTIAL)
        if rs == RESET:
            if os_ in (SYN_SENT, SYN_ACK_SENT) or (
                os_ == RESET and _size(o, r) == 0 and _size(r, o) == 0
            ):
                return "REJ"
            return "RSTRH" if o_inactive else "RSTR"
        if os_ == RESET:
            if r_inactive:
                return "RSTOS0" if _RSTOS0.fullmatch(self.history) else "OTH"
            return "RSTO"
        if rs == CLOSED and os_ == CLOSED:
            return "SF"
        if os_ == CLOSED:
            return "SH" if r_inactive else "S2"
        if rs == CLOSED:
            return "SHR" if o_inactive else "S3"
        if os_ == SYN_SENT and rs == INACTIVE:
            return "S0"
        if os_ == ESTABLISHED and rs == ESTABLISHED:
            return "S1"
        return "OTH"

    # ------------------------------------------------------------- internals

    def _add(self, code: str, from_client: bool) -> None:
        self._hist.append(code if from_client else code.lower())

    def _once(self, mask: int, code: str, from_client: bool) -> bool:
        """Zeek's CheckHistory: log the letter the first time; True if it was seen before."""
        if self._seen & mask:
            return True
        self._seen |= mask
        self._add(code, from_client)
        return False

    def _scaled(self, ep: _Endpoint, i: int, code: str, from_client: bool) -> None:
        """Zeek's ScaledHistoryEntry: log at the 1st, 10th, 100th ... occurrence."""
        counter = ep.scaled
        if counter is None:
            counter = ep.scaled = [0, 1, 0, 1, 0, 1, 0, 1]
        n = counter[i] = counter[i] + 1
        if n == counter[i + 1]:
            self._add(code, from_client)
            counter[i + 1] *= 10

    @staticmethod
    def _update_state(
        ep: _Endpoint,
        peer: _Endpoint,
        is_orig: bool,
        syn: bool,
        fin: bool,
        rst: bool,
        ack: bool,
        seg_len: int,
    ) -> None:
        """Zeek's UpdateStateMachine, endpoint states only (weirds and events left out)."""
        st = ep.state
        if st == INACTIVE:
            if syn:
                if is_orig:
                    ep.set_state(SYN_ACK_SENT if ack else SYN_SENT)
                else:
                    if not ack and peer.state == SYN_ACK_SENT:
                        # Zeek: SYN/SYN-ACK reversal, it flips the roles here and establishes
                        # the SYN-ACK sender; the caller's roles are kept (see module doc)
                        peer.set_state(ESTABLISHED)
                    if peer.state == SYN_SENT:
                        peer.set_state(ESTABLISHED)
                    ep.set_state(ESTABLISHED)
            if fin:
                ep.set_state(CLOSED)
            if rst:
                ep.set_state(RESET)
            if ep.state == INACTIVE:
                if not is_orig and seg_len == 0 and peer.state == SYN_SENT:
                    pass  # an ACK of the SYN before the SYN-ACK: not a partial connection
                elif ack and peer.state == ESTABLISHED:
                    ep.set_state(ESTABLISHED)  # the SYN was probably missed
                else:
                    ep.set_state(PARTIAL)
        elif st in (SYN_SENT, SYN_ACK_SENT):
            if fin:
                ep.set_state(CLOSED)
            if rst:
                ep.set_state(RESET)
        elif st in (ESTABLISHED, PARTIAL):
            if syn and st == PARTIAL and peer.state == INACTIVE and not ack:
                ep.set_state(SYN_SENT)
            if fin and not rst:
                ep.set_state(CLOSED)
                if peer.state == RESET and peer.prev_state == CLOSED:
                    # the peer sent FIN then RST: that was a normal termination
                    peer.set_state(CLOSED)
            if rst:
                ep.set_state(RESET)
        elif st == CLOSED and rst and peer.state != CLOSED:
            ep.set_state(RESET)
        # RESET: nothing changes any more


def _size(ep: _Endpoint, peer: _Endpoint) -> int:
    """Zeek's TCP_Endpoint::Size(), approximated by the payload bytes sent."""
    if ep.prev_state == SYN_SENT and ep.state == RESET and peer.state == INACTIVE:
        return 0  # a half-open connection discovered and aborted
    return ep.data_bytes
