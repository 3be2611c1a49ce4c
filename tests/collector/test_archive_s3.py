"""The archive in object storage, against a real S3 API server: moto's standalone server
(``moto.server.ThreadedMotoServer``), started by this module on 127.0.0.1 and stopped after it.

Checked: the collector's layout in a bucket (with the ``shard=`` level), a failed upload retried and counted
with its rows kept, a writer killed during uploads losing at most one flush, and the same analysis, report
readings and ``follow`` tail from the bucket as from the local folder it was copied from.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from analyzer import compare
from analyzer.analysis import Analysis, AnalysisInputs
from analyzer.archive_tail import ArchiveTail
from analyzer.report.readings import read_archive
from collector.clock import FakeClock
from collector.config import ArchiveConfig
from collector.exporters.archive import Archive
from collector.shard import Shard
from collector.storage import Bucket

pytestmark = pytest.mark.integration

moto_server = pytest.importorskip("moto.server", reason="moto (the test extra) runs the S3 API server")
boto3 = pytest.importorskip("boto3")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyzer"))
from synthetic_fabric import Episode, config_yaml, step_rows, steps_jsonl, write_archive  # noqa: E402

T0 = 1_764_496_800 * 10**9  # 2025-11-30T10:00:00Z
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "spanwatch-test",
    "AWS_SECRET_ACCESS_KEY": "spanwatch-test-secret",
    "AWS_REGION": "us-east-1",
}


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """moto's S3 server on loopback; the AWS_* environment pointing at it for the module."""
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    saved = {k: os.environ.get(k) for k in [*CREDENTIALS, "AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP"]}
    os.environ.update(CREDENTIALS, AWS_ENDPOINT_URL=url, AWS_ALLOW_HTTP="true")
    try:
        yield url
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _bucket(endpoint: str, name: str) -> str:
    boto3.client("s3", endpoint_url=endpoint, **_boto_credentials()).create_bucket(Bucket=name)
    return f"s3://{name}/archive"


def _boto_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "region_name": CREDENTIALS["AWS_REGION"],
    }


def _fill(archive: Archive, n: int) -> None:
    for i in range(n):
        archive.add(
            (
                T0 + i * 10**6,
                T0 + i * 10**6,
                "sw1",
                "gnmi",
                "dci_interface_receive_bytes_total",
                (("interface", f"Eth{i % 4}"),),
                "l1",
                float(i),
                i,
            )
        )


def test_a_flush_lands_in_the_bucket_in_the_layout_with_its_shard(endpoint: str) -> None:
    url = _bucket(endpoint, "layout")
    archive = Archive(url, FakeClock(), writer="w1", shard=3, bucket=Bucket(url))
    _fill(archive, 20)
    written = archive.flush()
    assert written == [f"{url}/shard=3/date=2025-11-30/hour=10/w1-000001.parquet"]
    frame = pl.read_parquet(str(written[0]))  # polars' own cloud reader, settings from the environment
    assert frame.height == 20 and sorted(frame["counter"].to_list()) == list(range(20))
    assert archive.rows_written == 20 and archive.write_errors == 0


def test_from_config_reads_its_secrets_from_files(endpoint: str, tmp_path: Path) -> None:
    url = _bucket(endpoint, "from-config")
    (tmp_path / "key").write_text(CREDENTIALS["AWS_ACCESS_KEY_ID"] + "\n")
    (tmp_path / "secret").write_text(CREDENTIALS["AWS_SECRET_ACCESS_KEY"] + "\n")
    config = ArchiveConfig(
        url=url,
        endpoint=endpoint,
        access_key_id_file=tmp_path / "key",
        secret_access_key_file=tmp_path / "secret",
    )
    archive = Archive.from_config(config, FakeClock(), Shard(1, 2))
    _fill(archive, 5)
    assert [str(p).split("/archive/")[1].split("/")[0] for p in archive.flush()] == ["shard=1"]


def test_an_invalid_url_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="url"):
        ArchiveConfig(url="s3:/missing-slash")


def test_a_failed_upload_is_retried_counted_and_its_rows_kept(endpoint: str) -> None:
    url = "s3://not-created-yet/archive"
    archive = Archive(url, FakeClock(), writer="w1", bucket=Bucket(url))
    _fill(archive, 7)
    assert archive.flush() == []
    assert archive.write_errors == 1 and archive.pending == 7
    assert archive.bucket is not None
    assert archive.bucket.put_retries == 2 and archive.bucket.put_failures == 1
    _bucket(endpoint, "not-created-yet")
    assert len(archive.flush()) == 1 and archive.rows_written == 7 and archive.pending == 0


WRITER = textwrap.dedent("""
    import asyncio, sys, time
    from collector.exporters.archive import Archive
    from collector.storage import Bucket

    async def main():
        archive = Archive(sys.argv[1], bucket=Bucket(sys.argv[1]))
        flusher = asyncio.create_task(archive.run(0.2))
        n = 0
        while True:
            now = time.time_ns()
            for _ in range(500):
                archive.add((now, now, "sw1", "snmp", "dci_interface_receive_bytes_total",
                             (("interface", "Eth1"),), None, float(n), n))
                n += 1
            print(n, archive.rows_written, flush=True)
            await asyncio.sleep(0.01)

    asyncio.run(main())
""")


def test_a_writer_killed_during_uploads_loses_at_most_one_flush(endpoint: str) -> None:
    url = _bucket(endpoint, "killed")
    proc = subprocess.Popen([sys.executable, "-c", WRITER, url], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    added = written = 0
    while time.monotonic() < deadline and written < 20_000:  # several flushes uploaded, more under way
        added, written = (int(x) for x in proc.stdout.readline().split())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    for line in proc.stdout.read().splitlines():
        added, written = (int(x) for x in line.split())
    proc.stdout.close()
    keys = [key for key, _ in Bucket(url).objects()]
    assert keys and all(key.endswith(".parquet") for key in keys)
    frame = pl.read_parquet([f"{url}/{key}" for key in keys])  # every visible object is complete
    assert frame.height >= written  # every flush the writer saw succeed is there
    rows_per_interval = 500 / 0.01 * 0.2 * 2  # generous: the writer adds at most this many per flush
    assert added - frame.height <= rows_per_interval
    assert sorted(frame["counter"].to_list()) == list(range(frame.height))  # nothing lost in the middle


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic fabric's archive, step log and config, written locally."""
    root = tmp_path_factory.mktemp("fabric")
    episodes = [Episode("drops", "a1", 60, 90), Episode("pfc", "b2", 150, 170)]
    write_archive(root / "archive", 240, episodes)
    steps_jsonl(root / "steps.jsonl", step_rows(240, episodes))
    config_yaml(root / "config.yaml")
    return root


def _upload(folder: Path, url: str) -> None:
    bucket = Bucket(url)
    for path in sorted(folder.rglob("*.parquet")):
        bucket.put(path.relative_to(folder).as_posix(), path.read_bytes())


def test_the_same_analysis_from_the_bucket_as_from_the_folder(endpoint: str, fabric: Path) -> None:
    url = _bucket(endpoint, "analysis")
    _upload(fabric / "archive", url)
    local = AnalysisInputs(
        archive=fabric / "archive", logs=(fabric / "steps.jsonl",), config=fabric / "config.yaml"
    )
    remote = AnalysisInputs(archive=url, logs=local.logs, config=local.config)
    a, b = Analysis(local).run(), Analysis(remote).run()
    assert a.events.height > 0 and a.steps.height > 0
    assert b.summary["inputs"]["archive"] == url
    b.summary["inputs"]["archive"] = a.summary["inputs"]["archive"]
    assert compare.differences(a, b) == []
    here, there = read_archive(fabric / "archive"), read_archive(url)
    assert there.note is None
    assert compare.table_differences("counts", here.counts, there.counts) == []


def test_follow_tails_a_bucket_and_keeps_no_copy(endpoint: str, fabric: Path) -> None:
    url = _bucket(endpoint, "follow")
    tail = ArchiveTail(url)
    assert tail.read().height == 0
    _upload(fabric / "archive", url)
    first = tail.read()
    assert first.height == ArchiveTail(fabric / "archive").read().height > 0
    assert tail.read().height == 0  # each object is read once
    assert list(tail.root.rglob("*.parquet")) == []  # the local copies are gone once read
    assert tail.fetch_errors == 0
