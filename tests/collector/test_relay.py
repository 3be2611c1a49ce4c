"""Workers to supervisor (issue 18): the relay frames, the merged exposition, the worker split."""

from __future__ import annotations

import asyncio
import pickle

from collector import shard
from collector.clock import FakeClock
from collector.exporters.prometheus import render
from collector.model import counter, labels
from collector.relay import Mirror, Outbox, encode, read_frame
from collector.store import Store, TargetLabels


def test_two_workers_merge_into_one_exposition() -> None:
    merged = Store(FakeClock())
    mirror = Mirror(merged)
    workers = {0: Store(FakeClock()), 1: Store(FakeClock())}
    boxes = {i: Outbox(s) for i, s in workers.items()}
    for i, store in workers.items():
        store.set_target(f"d{i}", TargetLabels(ttl=30))
        store.ingest(
            f"d{i}", "snmp", [counter("dci_interface_receive_bytes_total", labels(interface="e1"), 10)], 1
        )
        store.inc("spanwatch_archive_rows_total", (), 5)  # no device: summed over the workers
        store.observe("spanwatch_ingest_lag_seconds", (("device", f"d{i}"), ("source", "snmp")), 0.2)
    for i, box in boxes.items():
        frame = box.frame()
        assert frame is not None
        mirror.apply(i, pickle.loads(pickle.dumps(frame)))
    text = render(merged)
    assert text.count("# TYPE dci_interface_receive_bytes_total counter") == 1
    assert 'dci_interface_receive_bytes_total{device="d0",interface="e1"} 10' in text
    assert 'dci_interface_receive_bytes_total{device="d1",interface="e1"} 10' in text
    assert "spanwatch_archive_rows_total 10" in text
    assert 'spanwatch_ingest_lag_seconds_count{device="d1",source="snmp"} 1' in text

    # Only what changed travels next time; a value moves, a series goes.
    workers[0].ingest(
        "d0", "snmp", [counter("dci_interface_receive_bytes_total", labels(interface="e1"), 25)], 2
    )
    workers[0].forget("d0", "dci_interface_receive_bytes_total", labels(interface="e1"))
    workers[1].ingest(
        "d1", "snmp", [counter("dci_interface_receive_bytes_total", labels(interface="e1"), 30)], 2
    )
    assert boxes[1].frame() == ([], [0], [30], [])
    frame0 = boxes[0].frame()
    assert frame0 is not None and frame0[3] == [0]
    mirror.apply(0, frame0)
    mirror.apply(1, ([], [0], [30], []))
    text = render(merged)
    assert 'device="d0",interface="e1"' not in text
    assert 'dci_interface_receive_bytes_total{device="d1",interface="e1"} 30' in text

    # A worker that dies takes its series along; the shared sum drops its part.
    mirror.drop_worker(1)
    text = render(merged)
    assert "d1" not in text
    assert "spanwatch_archive_rows_total 5" in text
    assert boxes[0].frame() is None


async def test_frames_cross_a_stream() -> None:
    reader = asyncio.StreamReader()
    frame = ([(0, "spanwatch_target_up", (("device", "d"), ("source", "snmp")), "d", None, 1.0)], [], [], [])
    reader.feed_data(encode(frame) + encode(([], [0], [0.0], [])))
    reader.feed_eof()
    assert await read_frame(reader) == frame
    assert await read_frame(reader) == ([], [0], [0.0], [])
    assert await read_frame(reader) is None


def test_workers_split_each_shard_evenly_and_compose_with_it() -> None:
    names = [f"dev{i}" for i in range(400)]
    for sh in (None, shard.Shard(1, 3)):
        mine = [n for n in names if sh is None or sh.owns(n)]
        counts = [sum(shard.worker_of(n, 2, sh) == w for n in mine) for w in range(2)]
        assert min(counts) > 0.35 * len(mine)  # both workers get a fair share of the replica's targets


def test_a_series_created_and_removed_within_one_tick_is_never_sent() -> None:
    store = Store(FakeClock())
    box = Outbox(store)
    store.set_target("d", TargetLabels(ttl=30))
    lbls = labels(interface="e1")
    store.ingest("d", "gnmi", [counter("dci_interface_receive_bytes_total", lbls, 10)], 1)
    store.forget("d", "dci_interface_receive_bytes_total", lbls)  # a gNMI delete before the next frame
    frame = box.frame()
    assert frame is not None
    defs, _, _, removed = frame
    assert [d for d in defs if d[1] == "dci_interface_receive_bytes_total"] == []
    assert removed == []
