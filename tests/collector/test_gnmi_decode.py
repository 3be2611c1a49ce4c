"""gNMI decoding: every TypedValue kind, path joining and normalisation, table matching, deletes."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pygnmi.spec.v080 import gnmi_pb2

from collector.model import sample_of
from collector.sources.gnmi.client import make_path
from collector.sources.gnmi.decode import Decoder, JsonDoc, decode_value, flatten_json, normalise, number
from collector.sources.gnmi.paths import combined_table, load_set


def tv(**kw: Any) -> Any:
    return gnmi_pb2.TypedValue(**kw)


@pytest.mark.parametrize(
    ("val", "expected"),
    [
        (tv(uint_val=2**64 - 1), 2**64 - 1),
        (tv(int_val=-5), -5),
        (tv(double_val=1.5e-12), 1.5e-12),
        (tv(float_val=36.66), 36.66),
        (tv(decimal_val=gnmi_pb2.Decimal64(digits=-1234, precision=2)), -12.34),
        (tv(string_val="UP"), "UP"),
        (tv(bool_val=True), True),
        (tv(ascii_val="x"), "x"),
        (tv(bytes_val=struct.pack(">f", 2.32)), 2.32),  # Junos optics power (issue_17154)
        (tv(bytes_val=struct.pack(">d", -0.07)), -0.07),
        (tv(bytes_val=b"\x01\x02"), b"\x01\x02"),
        (tv(), None),
    ],
)
def test_decode_scalar_kinds(val: Any, expected: Any) -> None:
    assert decode_value(val) == expected


def test_decode_leaflist() -> None:
    val = tv(leaflist_val=gnmi_pb2.ScalarArray(element=[tv(uint_val=1), tv(string_val="a")]))
    assert decode_value(val) == [1, "a"]


def test_decode_json_kinds_and_flatten_strips_ietf_module_prefixes() -> None:
    doc = {"openconfig-platform-psu:enabled": True, "temperature": {"instant": "35.5", "avg": 24}}
    ietf = decode_value(tv(json_ietf_val=json.dumps(doc).encode()))
    assert isinstance(ietf, JsonDoc) and ietf.ietf
    leaves = {tuple(e[0] for e in p): v for p, v in flatten_json(ietf, [("state", {})])}
    assert leaves == {
        ("state", "enabled"): True,
        ("state", "temperature", "instant"): "35.5",
        ("state", "temperature", "avg"): 24,
    }
    plain = decode_value(tv(json_val=b'{"Ethernet0:3": {"X": "1"}}'))
    assert isinstance(plain, JsonDoc) and not plain.ietf
    assert [tuple(e[0] for e in p) for p, _ in flatten_json(plain, [])] == [("Ethernet0:3", "X")]


def test_flatten_keeps_leaflists_and_skips_keyless_lists() -> None:
    doc = JsonDoc({"a": [1, 2], "b": [{"name": "x"}]}, ietf=True)
    assert [(p[-1][0], v) for p, v in flatten_json(doc, [])] == [("a", [1, 2])]


@pytest.mark.parametrize(
    ("value", "values", "expected"),
    [
        (True, None, 1),
        ("12", None, 12),
        ("1.5e-3", None, 0.0015),
        ("NA", None, None),
        ("nan", None, None),
        ("openconfig-if-ethernet:SPEED_100GB", {"SPEED_100GB": 1.25e10}, 1.25e10),
        ("UP", {"DOWN": 0}, None),
        (b"\x00", None, None),
    ],
)
def test_number(value: Any, values: Any, expected: Any) -> None:
    assert number(value, values) == expected


def test_normalise_joins_prefix_strips_modules_and_origin() -> None:
    prefix = make_path("openconfig:/openconfig-interfaces:interfaces/interface[name=Ethernet1/1]")
    assert prefix.origin == "openconfig"
    path = make_path("/state/counters/in-octets")
    assert normalise(prefix, path) == [
        ("interfaces", {}),
        ("interface", {"name": "Ethernet1/1"}),
        ("state", {}),
        ("counters", {}),
        ("in-octets", {}),
    ]


def test_normalise_folds_junos_nameless_key_elements() -> None:
    prefix = gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name="qmon-sw"), gnmi_pb2.PathElem(key={"name": "xe-0"})])
    path = gnmi_pb2.Path(
        elem=[
            gnmi_pb2.PathElem(name="egress"),
            gnmi_pb2.PathElem(key={"queue-number": "3"}),
            gnmi_pb2.PathElem(name="packets"),
        ]
    )
    assert normalise(prefix, path) == [
        ("qmon-sw", {"name": "xe-0"}),
        ("egress", {"queue-number": "3"}),
        ("packets", {}),
    ]


def test_normalise_accepts_deprecated_string_elements() -> None:
    assert normalise(None, gnmi_pb2.Path(element=["a", "b"])) == [("a", {}), ("b", {})]


def decoder(*sets: str) -> Decoder:
    return Decoder(combined_table([load_set(s) for s in sets]))


def notif(prefix: str, updates: dict[str, Any], ts: int = 10, deletes: tuple[str, ...] = ()) -> Any:
    n = gnmi_pb2.Notification(timestamp=ts, prefix=make_path(prefix))
    for p, v in updates.items():
        n.update.add(path=make_path(p), val=v)
    for p in deletes:
        n.delete.append(make_path(p))
    return n


def by_metric(samples: list[Any]) -> dict[tuple[str, Any], Any]:
    return {(s.metric, s.labels): s for s in samples}


def test_interface_counters_with_module_prefixes_and_reset_marker() -> None:
    d = decoder("interfaces")
    n = notif(
        "/openconfig-interfaces:interfaces/interface[name=Et1]/state/counters",
        {"in-octets": tv(uint_val=100), "last-clear": tv(uint_val=777)},
        ts=5,
    )
    s = by_metric(d.notification(n)[0])[("dci_interface_receive_bytes_total", (("interface", "Et1"),))]
    # the first last-clear seen is the baseline epoch (None), wherever it sits in the notification
    assert (s.raw, s.epoch, s.time_ns, s.width) == (100, None, 5, 64)
    n = notif(
        "/openconfig-interfaces:interfaces/interface[name=Et1]/state/counters",
        {"in-octets": tv(uint_val=5), "last-clear": tv(uint_val=900)},
        ts=6,
    )
    s = by_metric(d.notification(n)[0])[("dci_interface_receive_bytes_total", (("interface", "Et1"),))]
    # a changed last-clear after the counter in the same notification: the counter is in the new epoch
    assert (s.raw, s.epoch) == (5, 1)


def test_stat_container_leaves_map_to_variants_and_scale() -> None:
    d = decoder("optical_channel")
    n = notif(
        "/components/component[name=OCH-1]/optical-channel/state",
        {
            "polarization-mode-dispersion/instant": tv(
                decimal_val=gnmi_pb2.Decimal64(digits=250, precision=2)
            ),
            "polarization-mode-dispersion/max": tv(double_val=4.0),
            "frequency": tv(uint_val=193_100_000),
            "pre-fec-ber/avg": tv(double_val=1e-5),
            "pre-fec-ber/interval": tv(uint_val=10**10),
        },
    )
    got = {s.metric: s.value for s in d.notification(n)[0]}
    assert got == pytest.approx(
        {
            "dci_optics_polarization_mode_dispersion_seconds": 2.5e-12,
            "dci_optics_polarization_mode_dispersion_seconds_max": 4e-12,
            "dci_optics_frequency_hertz": 193.1e12,
            "dci_optics_pre_fec_ber_avg": 1e-5,
        }
    )


def test_stat_container_as_json_ietf() -> None:
    d = decoder("transceiver")
    doc = {"openconfig-platform-transceiver:instant": "-2.31", "min": "-3.00", "max": "-1.5", "interval": "1"}
    n = notif(
        "/components/component[name=Ethernet1]/transceiver/physical-channels/channel[index=2]/state",
        {"input-power": tv(json_ietf_val=json.dumps(doc).encode())},
    )
    got = {(s.metric, s.labels): s.value for s in d.notification(n)[0]}
    lbl = (("lane", "2"), ("component", "Ethernet1"))
    assert got == {
        ("dci_optics_rx_power_dbm", lbl): -2.31,
        ("dci_optics_rx_power_dbm_min", lbl): -3.0,
        ("dci_optics_rx_power_dbm_max", lbl): -1.5,
    }


def test_enum_values_and_unmapped_strings() -> None:
    d = decoder("interfaces")
    n = notif(
        "/interfaces/interface[name=Et1]",
        {
            "state/oper-status": tv(string_val="LOWER_LAYER_DOWN"),
            "state/description": tv(string_val="x"),
            "ethernet/state/negotiated-port-speed": tv(string_val="openconfig-if-ethernet:SPEED_400GB"),
        },
    )
    got = {s.metric: s.value for s in d.notification(n)[0]}
    assert got == {"dci_interface_oper_up": 0, "dci_interface_speed_bytes_per_second": 5e10}


def test_ingress_queues_are_rx_series_beside_the_egress_ones() -> None:
    d = decoder("qos", "cumulus_qos", "qos_input")
    base = "/openconfig-qos:qos/interfaces/interface[interface-id=Ethernet1/1]"
    lengths = {"max-queue-len": tv(uint_val=9000), "instant-queue-len": tv(uint_val=4000)}
    got = {
        (s.metric, s.labels): s.value
        for side in ("output", "input")
        for s in d.notification(notif(f"{base}/{side}/queues/queue[name=3]/state", lengths))[0]
    }
    egress = (("interface", "Ethernet1/1"), ("queue", "3"))  # egress series keep their labels
    ingress = (*egress, ("direction", "rx"))
    assert got == {
        ("dci_queue_watermark_bytes", egress): 9000,
        ("dci_queue_occupancy_bytes", egress): 4000,
        ("dci_queue_watermark_bytes", ingress): 9000,
        ("dci_queue_occupancy_bytes", ingress): 4000,
    }


def test_sonic_element_name_captures_and_json_val_queues() -> None:
    d = decoder("sonic_counters")
    n = gnmi_pb2.Notification(timestamp=1, prefix=gnmi_pb2.Path(target="COUNTERS_DB"))
    n.update.add(
        path=make_path("COUNTERS/Ethernet8"),
        val=tv(
            json_val=b'{"SAI_PORT_STAT_PFC_3_RX_PKTS": "42", "SAI_PORT_STAT_PFC_3_RX_PAUSE'
            b'_DURATION_US": "1500", "SAI_PORT_STAT_IF_IN_OCTETS": "1"}'
        ),
    )
    n.update.add(
        path=make_path("COUNTERS/Ethernet8/Queues"),
        val=tv(json_val=b'{"Ethernet8:5": {"SAI_QUEUE_STAT_DROPPED_PACKETS": "7"}}'),
    )
    got = {(s.metric, s.labels): s.value for s in d.notification(n)[0]}
    assert got == {
        (
            "dci_pfc_pause_frames_total",
            (("interface", "Ethernet8"), ("priority", "3"), ("direction", "rx")),
        ): 42,
        (
            "dci_pfc_pause_duration_seconds_total",
            (("interface", "Ethernet8"), ("priority", "3"), ("direction", "rx")),
        ): pytest.approx(1.5e-3),
        ("dci_queue_dropped_packets_total", (("interface", "Ethernet8"), ("queue", "5"))): 7,
    }


def test_juniper_lanes_are_one_based() -> None:
    d = decoder("juniper_optics")
    n = notif(
        "/interfaces/interface[name=et-0/0/0]/optics/lanediags/lane[lane_number=0]",
        {"lane_laser_receiver_power_dbm": tv(bytes_val=struct.pack(">f", -0.07))},
    )
    (s,) = d.notification(n)[0]
    assert s.labels == (("interface", "et-0/0/0"), ("lane", "1")) and s.value == -0.07


def test_unmapped_paths_yield_nothing_and_are_cached() -> None:
    d = decoder("interfaces")
    n = notif("/network-instances/network-instance[name=default]", {"afts/x": tv(uint_val=1)})
    assert d.notification(n) == ([], [])
    assert d.notification(n) == ([], [])


def test_delete_removes_the_series_below_the_deleted_path() -> None:
    d = decoder("interfaces", "qos")
    d.notification(
        notif(
            "/interfaces/interface[name=Et1]/state/counters",
            {"in-octets": tv(uint_val=1), "out-octets": tv(uint_val=2)},
        )
    )
    d.notification(notif("/interfaces/interface[name=Et2]/state/counters", {"in-octets": tv(uint_val=3)}))
    _, gone = d.notification(notif("/", {}, deletes=("/interfaces/interface[name=Et1]",)))
    assert sorted(gone) == [
        ("dci_interface_receive_bytes_total", (("interface", "Et1"),)),
        ("dci_interface_transmit_bytes_total", (("interface", "Et1"),)),
    ]
    _, gone = d.notification(
        notif("/interfaces", {}, deletes=("interface[name=Et2]/state/counters/in-octets",))
    )
    assert gone == [("dci_interface_receive_bytes_total", (("interface", "Et2"),))]
    assert d.notification(notif("/", {}, deletes=("",)))[1] == []  # Huawei's empty delete (issue_17412)


def test_series_beyond_the_cap_are_counted_not_decoded_until_the_store_frees_room() -> None:
    d = Decoder(combined_table([load_set("interfaces")]), max_series=2)
    counters = "/interfaces/interface[name=Et1]/state/counters"
    first = notif(counters, {"in-octets": tv(uint_val=1), "out-octets": tv(uint_val=2)})
    assert len(d.notification(first)[0]) == 2
    flood = notif("/interfaces/interface[name=Et2]/state/counters", {"in-octets": tv(uint_val=3)})
    for _ in range(2):  # decided once, counted on every update
        assert d.notification(flood)[0] == []
    assert d.over_cap == 2
    assert len(d.notification(first)[0]) == 2  # the series within the cap go on
    # The store expired one of them: its room goes to the next new series.
    d.prune(lambda metric, lbls: metric == "dci_interface_receive_bytes_total")
    (sample,) = d.notification(flood)[0]
    assert sample.labels == (("interface", "Et2"),) and d.over_cap == 2


_LEAVES = ("in-octets", "out-pkts", "last-clear", "../oper-status", "../unmapped-leaf")
_VALUES = st.one_of(
    st.builds(lambda v: tv(uint_val=v), st.integers(0, 2**64 - 1)),
    st.builds(lambda v: tv(uint_val=v), st.integers(0, 3)),  # 0: an unset oneof member reads 0 too
    st.builds(lambda v: tv(string_val=v), st.sampled_from(["12", "UP", "DOWN", "x", "1.5"])),
    st.builds(lambda v: tv(int_val=v), st.integers(-5, 5)),
    st.builds(lambda v: tv(bool_val=v), st.booleans()),
    st.builds(lambda v: tv(double_val=v), st.floats(allow_nan=True)),
    st.just(tv()),
)
_NOTIFICATIONS = st.lists(
    st.tuples(
        st.sampled_from(["Et1", "Et2"]),
        st.dictionaries(st.sampled_from(_LEAVES), _VALUES, max_size=len(_LEAVES)),
        st.booleans(),  # a delete of Et1 first, in a notification of its own
    ),
    min_size=1,
    max_size=12,
)


_OCTETS = {"in-octets": tv(uint_val=5)}


@settings(max_examples=200, deadline=None)
@given(_NOTIFICATIONS)
# a path decided, its counter through a handle, deleted, decided again: a new handle
@example([("Et1", _OCTETS, False), ("Et1", _OCTETS, False), ("Et1", _OCTETS, True), ("Et1", _OCTETS, False)])
def test_counter_readings_through_handles_are_the_samples_a_plain_decoder_gives(
    notifications: list[tuple[str, dict[str, Any], bool]],
) -> None:
    """A decoder with ``handles`` says the same as one without, a plain counter's reading in a tuple that
    names its series' handle, the same handle for the series each time its path comes again."""
    table = combined_table([load_set("interfaces")])
    plain, handled = Decoder(table), Decoder(table, handles=True)
    handles: dict[tuple[str, Any], Any] = {}
    for interface, updates, delete in notifications:
        if delete:
            n = notif("/", {}, deletes=("/interfaces/interface[name=Et1]",))
            gone = handled.notification(n)[1]
            assert gone == plain.notification(n)[1]
            if gone:
                handles.clear()  # the decoder forgot its decisions: new handles from here on
        n = notif(f"/interfaces/interface[name={interface}]/state/counters", updates)
        expected = plain.notification(n)[0]
        readings = handled.notification(n)[0]
        assert repr([sample_of(r) for r in readings]) == repr(expected)  # repr: NaN values are equal
        for r in readings:
            if isinstance(r, tuple):
                handle = r[0]
                assert handles.setdefault((handle.metric, handle.labels), handle) is handle


@pytest.mark.parametrize("handles", [False, True])
@pytest.mark.parametrize(
    ("val", "raw"),
    [
        (tv(uint_val=0), 0),
        (tv(uint_val=7), 7),
        (tv(string_val="12"), 12),
        (tv(bool_val=True), 1),
        (tv(int_val=5), 5),
    ],
)
def test_a_counter_sent_in_another_kind_than_uint_is_read_as_its_number(
    val: Any, raw: int, handles: bool
) -> None:
    """The counters' inline path reads ``uint_val``, which is 0 when another kind is set: it must not
    take that 0 for the value."""
    d = Decoder(combined_table([load_set("interfaces")]), handles=handles)
    n = notif("/interfaces/interface[name=Et1]/state/counters", {"in-octets": val})
    for _ in range(2):  # the path is new, then decided
        (reading,) = d.notification(n)[0]
        assert sample_of(reading).raw == raw
