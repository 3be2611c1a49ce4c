"""The shallow view of a ``SubscribeResponse`` (paths kept as bytes) against gnmi.proto's own parser, the
reference: it reads every field the decoder uses as the reference does, and a response the reference
cannot parse is dropped and counted, never the end of the stream's batch."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st
from pygnmi.spec.v080 import gnmi_pb2

from collector.config import GnmiConfig
from collector.sources.gnmi import shallow
from collector.sources.gnmi.decode import Decoder
from collector.sources.gnmi.paths import load_set
from collector.sources.gnmi.source import GnmiSource
from collector.store import Store

NAMES = st.sampled_from(["interfaces", "interface", "state", "counters", "in-octets", "out-octets", "", "é"])
KEYS = st.dictionaries(st.sampled_from(["name", "id", "ß"]), st.text(max_size=6), max_size=2)
ELEMS = st.lists(st.tuples(NAMES, KEYS), max_size=5)
VALUES = st.one_of(
    st.builds(lambda v: gnmi_pb2.TypedValue(uint_val=v), st.integers(0, 2**64 - 1)),
    st.builds(lambda v: gnmi_pb2.TypedValue(string_val=v), st.text(max_size=8)),
    st.builds(lambda v: gnmi_pb2.TypedValue(double_val=v), st.floats(allow_nan=False)),
    st.just(gnmi_pb2.TypedValue()),
)


def make_path(elems: list[tuple[str, dict[str, str]]], origin: str = "") -> gnmi_pb2.Path:
    path = gnmi_pb2.Path(origin=origin)
    for name, keys in elems:
        elem = path.elem.add(name=name)
        for k, v in keys.items():
            elem.key[k] = v
    return path


@st.composite
def responses(draw: st.DrawFn) -> gnmi_pb2.SubscribeResponse:
    n = gnmi_pb2.Notification(timestamp=draw(st.integers(0, 2**63 - 1)))
    if draw(st.booleans()):
        n.prefix.CopyFrom(make_path(draw(ELEMS), draw(st.sampled_from(["", "openconfig"]))))
    for elems, value in draw(st.lists(st.tuples(ELEMS, VALUES), max_size=6)):
        u = n.update.add()
        u.path.CopyFrom(make_path(elems))
        u.val.CopyFrom(value)
    for elems in draw(st.lists(ELEMS, max_size=2)):
        n.delete.add().CopyFrom(make_path(elems))
    return gnmi_pb2.SubscribeResponse(update=n)


@given(responses())
@settings(max_examples=300, deadline=None)
def test_the_view_reads_what_gnmi_proto_reads(resp: gnmi_pb2.SubscribeResponse) -> None:
    raw = resp.SerializeToString()
    reference, view = gnmi_pb2.SubscribeResponse.FromString(raw), shallow.parse_response(raw)
    ref, got = reference.update, view.update
    assert got.timestamp == ref.timestamp
    assert shallow.path(got.prefix) == (
        ref.prefix if ref.HasField("prefix") and ref.prefix.ByteSize() else None
    )
    assert len(got.update) == len(ref.update)
    for u, r in zip(got.update, ref.update, strict=True):
        assert (shallow.path(u.path) or gnmi_pb2.Path()) == r.path
        assert u.val == r.val
    assert [shallow.path(d) or gnmi_pb2.Path() for d in got.delete] == list(ref.delete)
    # and a reference message converted for the decoder reads the same (as paths: protobuf may write a
    # path's keys, a map, in another order when it serialises the message again)
    converted = shallow.notification(ref)
    assert shallow.path(converted.prefix) == shallow.path(got.prefix)
    assert [shallow.path(u.path) for u in converted.update] == [shallow.path(u.path) for u in got.update]
    assert [u.val for u in converted.update] == [u.val for u in got.update]
    assert [shallow.path(d) for d in converted.delete] == [shallow.path(d) for d in got.delete]


def interface_response(round_: int) -> gnmi_pb2.SubscribeResponse:
    n = gnmi_pb2.Notification(timestamp=time.time_ns())
    n.prefix.CopyFrom(make_path([("interfaces", {}), ("interface", {"name": "Et1"}), ("state", {})]))
    for j, leaf in enumerate(("in-octets", "out-octets")):
        u = n.update.add()
        u.path.CopyFrom(make_path([("counters", {}), (leaf, {})]))
        u.val.uint_val = 1000 * round_ + j
    return gnmi_pb2.SubscribeResponse(update=n)


def source_and_store() -> tuple[GnmiSource, Store]:
    cfg = GnmiConfig(address="127.0.0.1:1", insecure=True, subscriptions=("interfaces",))
    return GnmiSource("dev", cfg), Store()


def undecodable(store: Store) -> float:
    labels = (("device", "dev"), ("source", "gnmi"), ("reason", "undecodable_message"))
    return store.value("spanwatch_invalid_values_total", labels) or 0  # type: ignore[return-value]


MUTATIONS = st.lists(
    st.tuples(st.sampled_from(["flip", "cut", "insert"]), st.integers(0, 10_000), st.integers(0, 255)),
    min_size=1,
    max_size=3,
)


def mutate(raw: bytes, mutations: list[tuple[str, int, int]]) -> bytes:
    data = bytearray(raw)
    for kind, at, byte in mutations:
        i = at % (len(data) + 1)
        if kind == "flip" and i < len(data):
            data[i] ^= byte or 1
        elif kind == "cut":
            del data[i:]
        else:
            data[i:i] = bytes([byte])
    return bytes(data)


@given(MUTATIONS)
@settings(max_examples=400, deadline=None)
def test_a_corrupt_response_is_dropped_and_counted_and_the_batch_goes_on(
    mutations: list[tuple[str, int, int]],
) -> None:
    source, store = source_and_store()
    first, second = interface_response(1), interface_response(2)
    bad = mutate(interface_response(3).SerializeToString(), mutations)
    now, wall = time.monotonic(), time.time_ns()
    source.ingest_batch(
        store, [(r, now, wall) for r in (first.SerializeToString(), bad, second.SerializeToString())]
    )
    (metric, labels), *_ = [
        (s.metric, s.labels) for s in Decoder(load_set("interfaces").table).notification(second.update)[0]
    ]
    try:
        gnmi_pb2.SubscribeResponse.FromString(bad)
    except Exception:
        # the reference rejects it: dropped and counted (or, where the damage is in a field the view
        # leaves unread, decoded: never an exception, never the batch's other responses lost)
        assert undecodable(store) in (0, 1)
    else:
        assert undecodable(store) == 0  # what the reference reads, the view reads
    assert store.holds("dev", metric, labels)  # the response after it was ingested


def test_a_path_that_does_not_parse_drops_its_response_only() -> None:
    source, store = source_and_store()
    bad = shallow.SubscribeResponse()
    bad.update.prefix = interface_response(1).update.prefix.SerializeToString()
    bad.update.update.add(path=b"\x0a\x7f")  # an element 127 bytes long, in 0 bytes
    bad.update.update[0].val.uint_val = 5
    now, wall = time.monotonic(), time.time_ns()
    items = [(bad.SerializeToString(), now, wall), (interface_response(2).SerializeToString(), now, wall)]
    source.ingest_batch(store, items)
    assert undecodable(store) == 1
    samples = Decoder(load_set("interfaces").table).notification(interface_response(2).update)[0]
    assert all(store.holds("dev", s.metric, s.labels) for s in samples) and samples
