"""SNMP: the polled source (``source``), the mapping schema (``tables``) and engine (``engine``), bounded
table walks (``walk``) over the transports (``transport``), and the wire: a BER codec (``ber``) with
SNMPv3's User-based Security Model (``usm``)."""
