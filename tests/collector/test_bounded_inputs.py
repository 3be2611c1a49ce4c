"""Issue 16, items 8 and 10: bad YAML gives one clear error; the archive buffer, the series per target and
the per-series caches are bounded; rows that never reach the archive are logged and fail the exit code."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collector.clock import FakeClock
from collector.config import GnmiConfig, load
from collector.daemon import Daemon
from collector.errors import ConfigError
from collector.exporters.archive import ROW_BYTES, Archive
from collector.model import counter, labels
from collector.sources.gnmi.client import open_channel
from collector.sources.gnmi.decode import Decoder
from collector.sources.gnmi.paths import load_set
from collector.store import Store, TargetLabels
from spanwatch.sim.commands import free_port

RX = "dci_interface_receive_bytes_total"
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (os.urandom(64) + b"\xff\xfe\x00", "not UTF-8"),
        ("collector: {listen: 'é'}\n".encode("latin-1"), "not UTF-8"),
        (b"targets: " + b"[" * 20_000 + b"]" * 20_000, "nested deeper"),
        (BOMB.encode() + b"targets: *i\n", "too many aliases"),
        (b"\x00\x01binary", "not valid YAML"),
    ],
    ids=["binary", "latin1", "deep", "alias_bomb", "control_chars"],
)
def test_bad_yaml_is_one_clear_error(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "collector.yml"
    path.write_bytes(content)
    start = time.monotonic()
    with pytest.raises(ConfigError) as err:
        load(path)
    assert time.monotonic() - start < 5
    assert len(err.value.problems) == 1
    assert message in err.value.problems[0] and "\n" not in err.value.problems[0]


def test_check_config_on_an_alias_bomb_exits_1_quickly(tmp_path: Path) -> None:
    # Reproduction: 9.9 GB and no answer after 120 s. Run in a child with a 2 GB address space cap.
    path = tmp_path / "bomb.yml"
    path.write_text(BOMB + "targets: *i\n")

    # The cap is set by the child itself before it becomes the CLI (no ``preexec_fn``: that makes
    # subprocess fork rather than vfork, and a fork while an earlier test's gRPC threads are busy runs gRPC's
    # fork handlers, which aborted the child once in CI).
    capped = (
        "import os, resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3)); "
        "os.execv(sys.executable, [sys.executable, '-m', 'spanwatch.cli', *sys.argv[1:]])"
    )
    done = subprocess.run(
        [sys.executable, "-c", capped, "check-config", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert done.returncode == 1
    assert "too many aliases" in done.stderr and "Traceback" not in done.stderr


def test_a_large_legitimate_config_with_anchors_still_loads(tmp_path: Path) -> None:
    targets = "".join(
        f"  - {{<<: *t, name: sw{i}, snmp: {{address: '10.0.{i // 250}.{i % 250}:161', community_env: C}}}}\n"
        for i in range(2000)
    )
    path = tmp_path / "big.yml"
    path.write_text("x-template: &t {labels: {site: a}}\ntargets:\n" + targets)
    os.environ.setdefault("C", "public")
    with pytest.raises(ConfigError) as err:  # the template key is unknown: a normal validation error
        load(path)
    assert "x-template: unknown key" in err.value.problems


# -- archive buffer ------------------------------------------------------------------------------------
def test_archive_buffer_is_bounded_in_bytes_dropping_the_oldest(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    archive = Archive(blocked / "archive", writer="w", max_buffer_bytes=ROW_BYTES * 100)
    store = Store(archive=archive)
    for i in range(1000):
        store.ingest("d", "snmp", [counter(RX, labels(interface="Et1"), i)], 10**18 + i)
        if i % 250 == 0:
            archive.flush()  # fails: the rows are kept, within the bound
    assert archive.pending <= 100
    assert archive.pending + archive.rows_dropped["buffer_full"] == 1000
    assert archive.write_errors == 4
    assert archive.rows()[-1][-1] == 999  # the newest rows are the ones kept


async def test_unwritable_archive_logs_lost_rows_and_fails_the_exit_code(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Reproduction: a read-only archive exited 0 with 287 rows never written.
    (tmp_path / "file").write_text("not a directory")
    config = tmp_path / "collector.yml"
    config.write_text(
        f"collector: {{listen: '127.0.0.1:{free_port()}', archive: {{path: file/archive, flush_interval: 100ms}}}}\n"
    )
    daemon = Daemon(config)
    task = asyncio.create_task(daemon.run())
    async with asyncio.timeout(10):
        while daemon.archive is None and not task.done():  # noqa: ASYNC110 (polling a plain attribute)
            await asyncio.sleep(0.01)
    assert not task.done(), task.exception()
    daemon.store.ingest("d", "snmp", [counter(RX, labels(interface=f"Et{i}"), i) for i in range(287)], 10**18)
    caplog.set_level(logging.ERROR)
    await asyncio.sleep(0.3)
    daemon.stop()
    await asyncio.wait_for(task, 10)
    assert daemon.rows_lost == 287
    assert daemon.store.value("spanwatch_archive_write_errors_total", ()) >= 2  # type: ignore[operator]
    assert any("287 rows were never written" in r.getMessage() for r in caplog.records)


# -- series -------------------------------------------------------------------------------------------
def test_series_beyond_the_cap_are_dropped_and_counted() -> None:
    store = Store()
    store.set_target("d", TargetLabels(max_series=100))
    store.ingest("d", "gnmi", [counter(RX, labels(interface=f"Et{i}"), i) for i in range(150)], 0)
    assert len(store.items(RX)) == 100
    assert store.value("spanwatch_series_dropped_total", (("device", "d"),)) == 50
    store.ingest("d", "gnmi", [counter(RX, labels(interface="Et1"), 5)], 0)  # a known series still moves
    assert store.value(RX, (("device", "d"), ("interface", "Et1"))) == 5


def test_expired_series_free_their_caches_and_their_place_under_the_cap() -> None:
    clock = FakeClock()
    store = Store(clock)
    store.set_target("d", TargetLabels(ttl=10, max_series=1000))
    for wave in range(20):  # 20 waves of 500 new series: 10,000 series over time, 500 alive at once
        lbls = [labels(interface=f"w{wave}-{i}") for i in range(500)]
        store.ingest("d", "gnmi", [counter(RX, x, 1) for x in lbls], 0)
        clock._now += 11
        store.expire()
    assert store._rows == {} and store._others == {}
    assert sorted(store._free) == list(
        range(len(store._kind))
    )  # every slot free again, none grown past 1,000
    assert store.value("spanwatch_series_dropped_total", (("device", "d"),)) is None


def test_the_gnmi_decoder_forgets_series_the_store_expired() -> None:
    from pygnmi.spec.v080 import gnmi_pb2

    from collector.sources.gnmi.client import make_path

    decoder = Decoder(load_set("interfaces").table)
    for i in range(50):
        n = gnmi_pb2.Notification(
            timestamp=1, prefix=make_path(f"/interfaces/interface[name=e{i}]/state/counters")
        )
        n.update.add(path=make_path("in-octets"), val=gnmi_pb2.TypedValue(uint_val=1))
        decoder.notification(n)
    assert len(decoder._live) == 50
    assert decoder.prune(lambda metric, lbls: lbls == (("interface", "e7"),)) == 49
    assert list(decoder._live) == [(RX, (("interface", "e7"),))]


def test_gnmi_channel_caps_the_message_size_from_the_config() -> None:
    cfg = GnmiConfig.model_validate({"address": "127.0.0.1:1", "insecure": True})
    assert cfg.max_message_bytes == 16 * 1024 * 1024
    seen: list[object] = []

    import grpc

    real = grpc.aio.insecure_channel

    def spy(target: str, options: list[tuple[str, object]]) -> object:
        seen.extend(options)
        return real(target, options=options)

    grpc.aio.insecure_channel = spy  # type: ignore[assignment]
    try:
        asyncio.run(_open_and_close(cfg.model_copy(update={"max_message_bytes": 1 << 20})))
    finally:
        grpc.aio.insecure_channel = real
    assert ("grpc.max_receive_message_length", 1 << 20) in seen


async def _open_and_close(cfg: GnmiConfig) -> None:
    await open_channel(cfg).close()


def test_config_keys_have_bounded_defaults() -> None:
    from collector.config import ArchiveConfig, Defaults

    assert Defaults().max_series_per_target == 50_000
    assert ArchiveConfig().max_buffer_bytes == 256 * 1024 * 1024
