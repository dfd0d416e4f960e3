"""Link-layer types (LINKTYPE_* values of pcap/pcapng) and the per-interface description.

The one home of link-type names: values and names follow https://www.tcpdump.org/linktypes.html
(:data:`LINKTYPE_NAMES`, used in messages through :func:`linktype_name`, which falls back to the
number for the others) and :data:`LINKTYPE_LABELS` gives the common ones in plain words.
"""

from __future__ import annotations

from dataclasses import dataclass

#: LINKTYPE value -> short name as in the tcpdump.org list (without the LINKTYPE_ prefix)
LINKTYPE_NAMES: dict[int, str] = {
    0: "NULL (BSD loopback)",
    1: "ETHERNET",
    3: "AX25",
    6: "IEEE802_5 (Token Ring)",
    7: "ARCNET_BSD",
    8: "SLIP",
    9: "PPP",
    10: "FDDI",
    12: "RAW (DLT_RAW, link type 12)",
    14: "RAW (DLT_RAW on OpenBSD, link type 14)",
    50: "PPP_HDLC",
    51: "PPP_ETHER (PPPoE)",
    100: "ATM_RFC1483",
    101: "RAW",
    104: "C_HDLC (Cisco HDLC)",
    105: "IEEE802_11 (Wi-Fi)",
    107: "FRELAY",
    108: "LOOP (OpenBSD loopback)",
    113: "LINUX_SLL",
    114: "LTALK",
    117: "PFLOG",
    119: "IEEE802_11_PRISM",
    122: "IP_OVER_FC",
    123: "SUNATM",
    127: "IEEE802_11_RADIOTAP",
    129: "ARCNET_LINUX",
    138: "APPLE_IP_OVER_IEEE1394",
    139: "MTP2_WITH_PHDR",
    140: "MTP2",
    141: "MTP3",
    142: "SCCP",
    143: "DOCSIS",
    144: "LINUX_IRDA",
    147: "USER0",
    163: "IEEE802_11_AVS",
    165: "BACNET_MS_TP",
    166: "PPP_PPPD",
    169: "GPRS_LLC",
    177: "LINUX_LAPD",
    187: "BLUETOOTH_HCI_H4",
    189: "USB_LINUX",
    192: "PPI",
    195: "IEEE802_15_4_WITHFCS",
    196: "SITA",
    197: "ERF",
    201: "BLUETOOTH_HCI_H4_WITH_PHDR",
    202: "AX25_KISS",
    203: "LAPD",
    204: "PPP_WITH_DIR",
    205: "C_HDLC_WITH_DIR",
    209: "IPMB_LINUX",
    215: "IEEE802_15_4_NONASK_PHY",
    220: "USB_LINUX_MMAPPED",
    224: "FC_2",
    226: "IPNET",
    227: "CAN_SOCKETCAN",
    228: "IPV4",
    229: "IPV6",
    230: "IEEE802_15_4_NOFCS",
    231: "DBUS",
    235: "DVB_CI",
    239: "NFLOG",
    240: "NETANALYZER",
    242: "IPOIB",
    243: "MPEG_2_TS",
    247: "INFINIBAND",
    248: "SCTP",
    249: "USBPCAP",
    251: "BLUETOOTH_LE_LL",
    253: "NETLINK",
    254: "BLUETOOTH_LINUX_MONITOR",
    256: "BLUETOOTH_LE_LL_WITH_PHDR",
    258: "WIRESHARK_UPPER_PDU",
    263: "ZWAVE_R3",
    266: "USB_DARWIN",
    270: "DISPLAYPORT_AUX",
    272: "NORDIC_BLE",
    274: "ETHERNET_MPACKET",
    276: "LINUX_SLL2",
    279: "EBHSCR",
    281: "IEEE802_15_4_TAP",
    283: "USB_2_0",
    290: "ETW",
}

#: LINKTYPE value -> plain-words label for people (the report's capture facts); the link types
#: most captures have (others: :data:`LINKTYPE_NAMES` / :func:`linktype_name`)
LINKTYPE_LABELS: dict[int, str] = {
    0: "NULL/loopback",
    1: "Ethernet",
    9: "PPP",
    101: "raw IP",
    113: "Linux cooked",
    228: "raw IPv4",
    229: "raw IPv6",
    276: "Linux cooked v2",
}

#: Wireshark refuses packets longer than this for most link types (WTAP_MAX_PACKET_SIZE_STANDARD)
MAX_PACKET_STANDARD = 262_144
#: ... and allows these larger maxima for a few link types (D-Bus, USB, EBHSCR)
_MAX_PACKET_BY_LINKTYPE: dict[int, int] = {
    231: 128 * 1024 * 1024,  # DBUS
    249: 128 * 1024 * 1024,  # USBPCAP
    189: 128 * 1024 * 1024,  # USB_LINUX
    220: 128 * 1024 * 1024,  # USB_LINUX_MMAPPED
    266: 128 * 1024 * 1024,  # USB_DARWIN
    279: 8 * 1024 * 1024,  # EBHSCR
}


def linktype_name(linktype: int) -> str:
    """``"LINKTYPE_USB_LINUX (189)"``-style name for messages (``"LINKTYPE 4242"`` if unknown)."""
    name = LINKTYPE_NAMES.get(linktype)
    return f"LINKTYPE_{name} ({linktype})" if name else f"LINKTYPE {linktype}"


def max_packet_len(linktype: int) -> int:
    """Largest captured length Wireshark accepts for this link type (longer: an error)."""
    return _MAX_PACKET_BY_LINKTYPE.get(linktype, MAX_PACKET_STANDARD)


@dataclass(slots=True)
class InterfaceInfo:
    """One capture interface: the pcap file header, or one pcapng Interface Description Block."""

    linktype: int
    """LINKTYPE_* value (pcap: the header's link type with the FCS bits masked off)"""
    snaplen: int
    """snapshot length (0: not set)"""
    tsresol: int = 1_000_000
    """timestamp ticks per second (pcap: 10**6 or 10**9; pcapng: if_tsresol)"""
    tsoffset: int = 0
    """if_tsoffset: seconds added to every timestamp of the interface"""
    name: str | None = None
    """if_name, when the IDB has one"""
    description: str | None = None
    """if_description, when the IDB has one"""
    fcs_len: int | None = None
    """bytes of frame check sequence at the end of each packet, when the file says so"""
    section: int = 0
    """index of the pcapng section the interface belongs to (0 for pcap)"""

    @property
    def linktype_name(self) -> str:
        """Human-readable link type, e.g. ``"LINKTYPE_ETHERNET (1)"``."""
        return linktype_name(self.linktype)
