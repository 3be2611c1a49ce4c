"""Issue 16, items 3 and 4: a value the catalogue cannot hold is dropped and counted; it never stops a
gNMI stream or the archive, and a stream task that dies marks its target down."""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from pygnmi.spec.v080 import gnmi_pb2

from collector.config import GnmiConfig
from collector.exporters.archive import Archive
from collector.model import counter, gauge, labels
from collector.sources.gnmi.client import make_path
from collector.sources.gnmi.source import GnmiSource, PermanentFailure
from collector.store import Store

RX = "dci_interface_receive_bytes_total"
ET1 = labels(interface="Et1")
COUNTERS = "/interfaces/interface[name=Et1]/state/counters"


def invalid(store: Store, reason: str, device: str = "d", source: str = "gnmi") -> Any:
    return store.value(
        "spanwatch_invalid_values_total", (("device", device), ("source", source), ("reason", reason))
    )


@pytest.mark.parametrize(
    ("sample", "reason"),
    [(counter(RX, ET1, -5), "negative"), (counter(RX, ET1, 2**64 + 5), "above_uint64")],
)
def test_out_of_range_counters_are_dropped_and_counted(sample: Any, reason: str) -> None:
    store = Store()
    assert store.ingest("d", "snmp", [sample, counter(RX, labels(interface="Et2"), 7)], 0) == 1
    assert invalid(store, reason, source="snmp") == 1
    assert store.value(RX, (("device", "d"), ("interface", "Et1"))) is None
    assert store.value(RX, (("device", "d"), ("interface", "Et2"))) == 7


def test_non_finite_counters_and_string_gauges_are_dropped() -> None:
    store = Store()
    nan_counter = counter(RX, ET1, 0)
    nan_counter.raw, nan_counter.value = None, math.nan
    inf_counter = counter(RX, ET1, 0)
    inf_counter.raw, inf_counter.value = None, math.inf
    text_gauge = gauge("dci_optics_rx_power_dbm", ET1, 0.0)
    text_gauge.value = "-3.2"  # type: ignore[assignment]
    assert store.ingest("d", "gnmi", [nan_counter, inf_counter, text_gauge], 0) == 0
    assert (invalid(store, "nan"), invalid(store, "inf"), invalid(store, "not_a_number")) == (1, 1, 1)
    assert RX not in store.metrics()


def test_invalid_values_log_one_line_per_reason_not_one_per_value(caplog: pytest.LogCaptureFixture) -> None:
    store = Store()
    caplog.set_level(logging.WARNING, logger="collector.store")
    for _ in range(50):
        store.ingest("flood", "snmp", [counter(RX, ET1, -1)], 0)
    assert invalid(store, "negative", device="flood", source="snmp") == 50
    lines = [r for r in caplog.records if "flood" in r.getMessage()]
    assert len(lines) == 1
    assert "negative" in lines[0].getMessage()


def test_one_out_of_range_counter_does_not_stop_the_archive(tmp_path: Path) -> None:
    # Reproduction of F12: the flush raised OverflowError, the rows of every device were lost.
    archive = Archive(tmp_path, writer="w")
    store = Store(archive=archive)
    store.ingest("bad", "gnmi", [counter(RX, ET1, -5)], 10**18)
    store.ingest("bad", "snmp", [counter(RX, ET1, 2**64 + 5)], 10**18)
    store.ingest("good", "snmp", [counter(RX, ET1, 42)], 10**18)
    files = archive.flush()
    assert archive.write_errors == 0 and archive.pending == 0
    frame = pl.read_parquet(files)
    assert frame["device"].to_list() == ["good"] and frame["counter"].to_list() == [42]


def test_archive_flush_drops_unwritable_rows_counts_them_and_writes_the_rest(tmp_path: Path) -> None:
    archive = Archive(tmp_path, writer="w")
    archive.add((10**18, 10**18, "a", "snmp", RX, ET1, None, -1.0, -1))  # a row that bypassed the store
    archive.add((10**18, 10**18, "b", "snmp", RX, ET1, None, 5.0, 5))
    files = archive.flush()
    assert archive.write_errors == 0  # a number no column holds is dropped as the rows move into columns
    assert archive.rows_dropped == {"unwritable": 1}
    assert pl.read_parquet(files)["device"].to_list() == ["b"]
    not_text = (("interface", b"\xff"),)
    archive.add((10**18, 10**18, "c", "snmp", RX, not_text, None, 5.0, 5))  # type: ignore[arg-type]
    archive.add((10**18, 10**18, "d", "snmp", RX, ET1, None, 5.0, 5))
    files = archive.flush()
    assert archive.write_errors == 1  # a string that is not text is found as the file is written
    assert archive.rows_dropped == {"unwritable": 2}
    assert pl.read_parquet(files)["device"].to_list() == ["d"]
    assert archive.rows_written == 2 and archive.pending == 0


def test_archive_flush_loop_survives_any_exception(tmp_path: Path) -> None:
    archive = Archive(tmp_path, writer="w")
    third = asyncio.Event()
    calls = 0

    def broken(buffer: object) -> list[Path]:
        nonlocal calls
        calls += 1
        if calls == 3:
            loop.call_soon_threadsafe(third.set)
        raise RuntimeError("boom")

    archive._write_all = broken  # type: ignore[method-assign,assignment]

    async def main() -> None:
        task = asyncio.create_task(archive.run(0.001))
        await asyncio.wait_for(third.wait(), 5)
        assert not task.done()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert archive.write_errors >= 2


# -- gNMI ---------------------------------------------------------------------------------------------
def _cfg() -> GnmiConfig:
    return GnmiConfig.model_validate({"address": "127.0.0.1:1", "insecure": True})


def response(**val: Any) -> bytes:
    n = gnmi_pb2.Notification(timestamp=1, prefix=make_path(COUNTERS))
    n.update.add(path=make_path("in-octets"), val=gnmi_pb2.TypedValue(**val))
    return bytes(gnmi_pb2.SubscribeResponse(update=n).SerializeToString())


def json_response(body: bytes) -> bytes:
    n = gnmi_pb2.Notification(timestamp=1, prefix=make_path("/interfaces/interface[name=Et1]/state"))
    n.update.add(path=make_path("counters"), val=gnmi_pb2.TypedValue(json_ietf_val=body))
    return bytes(gnmi_pb2.SubscribeResponse(update=n).SerializeToString())


class FakeCall:
    """A stream's call: yields serialised responses, then ends."""

    def __init__(self, messages: list[bytes]) -> None:
        self.messages = messages

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for m in self.messages:
            yield m


@pytest.mark.parametrize(
    "bad",
    [
        response(double_val=math.nan),
        response(double_val=math.inf),
        response(int_val=-5),
        json_response(b'{"in-octets": '),
        json_response(b"[" * 100_000 + b"]" * 100_000),
        json_response(b'{"in-octets": "\xff\xfe"}'),
        b"\xff" * 7,
    ],
    ids=["nan", "inf", "negative", "truncated_json", "deep_json", "non_utf8_json", "undecodable"],
)
def test_one_bad_update_does_not_end_the_stream(bad: bytes) -> None:
    store = Store()
    source = GnmiSource("d", _cfg())
    good = response(uint_val=1234)
    asyncio.run(source._read(store, None, FakeCall([good, bad, good]), [0.0]))
    assert store.value(RX, (("device", "d"), ("interface", "Et1"))) == 1234
    assert store.value("spanwatch_target_up", (("device", "d"), ("source", "gnmi"))) == 1
    counted = store.families.get("spanwatch_invalid_values_total", {})
    assert sum(s.value for s in counted.values()) == 1  # type: ignore[misc]


def test_deep_json_is_refused_before_parsing() -> None:
    store = Store()
    source = GnmiSource("d", _cfg())
    body = json.dumps({"in-octets": 5}).encode()
    asyncio.run(source._read(store, None, FakeCall([json_response(body)]), [0.0]))
    assert store.value(RX, (("device", "d"), ("interface", "Et1"))) == 5


def test_a_stream_task_that_dies_marks_the_target_down(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store()
    source = GnmiSource("d", _cfg())

    async def dies(*_: Any) -> None:
        store.set("spanwatch_target_up", (("device", "d"), ("source", "gnmi")), 1)
        raise KeyError("a bug")

    monkeypatch.setattr(source, "_supervise", dies)
    caplog.set_level(logging.ERROR)
    with pytest.raises(ExceptionGroup):
        asyncio.run(source.run(store))
    assert store.value("spanwatch_target_up", (("device", "d"), ("source", "gnmi"))) == 0
    assert any("stream task died" in r.getMessage() for r in caplog.records)


def test_an_unexpected_stream_error_redials_instead_of_ending(monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store()
    source = GnmiSource("d", _cfg(), permanent_retry=None)
    dials = 0

    async def stream(*_: Any) -> None:
        nonlocal dials
        dials += 1
        if dials >= 3:
            raise PermanentFailure("enough")  # ends the test: no retry after a permanent failure
        raise ValueError("something unexpected")

    async def no_wait(_: float) -> None:
        return None

    monkeypatch.setattr(source, "_stream", stream)
    monkeypatch.setattr(source.clock, "sleep", no_wait)
    asyncio.run(source.run(store))
    assert dials == 3
    assert store.value("spanwatch_gnmi_reconnects_total", (("device", "d"),)) == 2


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (response(string_val="lots"), "not_a_number"),
        (response(string_val="1e400"), "inf"),
        (response(string_val="nan"), "nan"),
        (json_response(b'{"in-octets": "lots"}'), "not_a_number"),
        (json_response(b'{"in-octets": "1e400"}'), "inf"),
        (json_response(b'{"in-octets": 18446744073709551621}'), "above_uint64"),
    ],
    ids=["string", "string_1e400", "string_nan", "json_string", "json_1e400", "json_above_2_64"],
)
def test_every_dropped_gnmi_value_is_counted_with_its_reason(bad: bytes, reason: str) -> None:
    # Issue 34 point 5: non-numeric strings were dropped without being counted.
    store = Store()
    source = GnmiSource("d", _cfg())
    asyncio.run(source._read(store, None, FakeCall([response(uint_val=1234), bad]), [0.0]))
    assert store.value(RX, (("device", "d"), ("interface", "Et1"))) == 1234
    assert invalid(store, reason) == 1
