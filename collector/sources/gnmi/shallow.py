"""Shallow views of gNMI's ``SubscribeResponse``: the same wire format, with every ``Path`` kept as its bytes.

The decoder's cache of decisions is keyed by a path's serialised bytes. Parsed as ``gnmi.proto`` declares
it, each update's path becomes a message only to be serialised again for that key: a wrapper and a
serialisation per update, about half of the mapping's cost (bench/README.md, issue 33). A length-delimited
field parses equally as a message or as bytes (protobuf's wire format does not tell them apart), so these
views declare ``Notification.prefix``, ``Notification.delete`` and ``Update.path`` as bytes, with the
field numbers of gnmi.proto (openconfig/gnmi, v0.8 as pygnmi ships it); values and errors stay real gNMI
messages (``TypedValue``, ``Error``). A path is parsed (``gnmi_pb2.Path``) only when the decoder
meets its bytes for the first time. Fields these views do not declare are kept as unknown fields.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from pygnmi.spec.v080 import gnmi_pb2

PACKAGE = "spanwatch.gnmi_shallow"
_F = descriptor_pb2.FieldDescriptorProto

# (message, [(field, number, type, repeated, message type)]): the field numbers are gnmi.proto's.
_MESSAGES: tuple[tuple[str, tuple[tuple[str, int, int, bool, str], ...]], ...] = (
    (
        "Update",
        (
            ("path", 1, _F.TYPE_BYTES, False, ""),
            ("val", 3, _F.TYPE_MESSAGE, False, ".gnmi.TypedValue"),
        ),
    ),
    (
        "Notification",
        (
            ("timestamp", 1, _F.TYPE_INT64, False, ""),
            ("prefix", 2, _F.TYPE_BYTES, False, ""),
            ("update", 4, _F.TYPE_MESSAGE, True, f".{PACKAGE}.Update"),
            ("delete", 5, _F.TYPE_BYTES, True, ""),
        ),
    ),
    (
        "SubscribeResponse",
        (
            ("update", 1, _F.TYPE_MESSAGE, False, f".{PACKAGE}.Notification"),
            ("sync_response", 3, _F.TYPE_BOOL, False, ""),
            ("error", 4, _F.TYPE_MESSAGE, False, ".gnmi.Error"),
        ),
    ),
)


def _classes() -> dict[str, Any]:
    """The view classes, registered once in protobuf's default pool (where gnmi.proto is)."""
    pool = descriptor_pool.Default()
    name = f"{PACKAGE.replace('.', '/')}.proto"
    try:
        pool.FindFileByName(name)
    except KeyError:
        fd = descriptor_pb2.FileDescriptorProto(
            name=name, package=PACKAGE, syntax="proto3", dependency=[gnmi_pb2.DESCRIPTOR.name]
        )
        for message, fields in _MESSAGES:
            m = fd.message_type.add(name=message)
            for field, number, kind, repeated, type_name in fields:
                label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
                m.field.add(name=field, number=number, type=kind, label=label, type_name=type_name or None)
        pool.Add(fd)
    return {
        message: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{message}"))
        for message, _ in _MESSAGES
    }


_CLASSES = _classes()
SubscribeResponse: Any = _CLASSES["SubscribeResponse"]
Notification: Any = _CLASSES["Notification"]

parse_response = SubscribeResponse.FromString


def notification(n: Any) -> Any:
    """``n`` as a shallow ``Notification`` (a ``gnmi_pb2.Notification`` is converted through its bytes)."""
    if n.__class__ is Notification:
        return n
    return Notification.FromString(n.SerializeToString())


def response(resp: Any) -> Any:
    """``resp`` as a shallow ``SubscribeResponse`` (a ``gnmi_pb2.SubscribeResponse`` is converted)."""
    if resp.__class__ is SubscribeResponse:
        return resp
    return SubscribeResponse.FromString(resp.SerializeToString())


def path(raw: bytes) -> Any:
    """A path's bytes as a ``gnmi_pb2.Path`` (None for none: an empty prefix).

    Raises:
        google.protobuf.message.DecodeError: the bytes are not a Path.
    """
    return gnmi_pb2.Path.FromString(raw) if raw else None
