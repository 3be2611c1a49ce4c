"""Where an archive lives: a local folder, or an S3-compatible bucket (``s3://bucket/prefix``).

The bucket is reached through ``obstore`` (the Rust ``object_store`` crate, which polars' own cloud reader
also uses). Settings come from the arguments, else from the standard ``AWS_*`` environment variables
(``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_ALLOW_HTTP``, web identity tokens...), so a Kubernetes secret or an instance role works unchanged.

An object is visible only once its PUT completed, which gives what the local archive gets from its
write-then-rename: a reader never sees half a file. obstore's own retries are off: ``put`` retries here, so
that every retry is counted and a flush waits a bounded time.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from collector.errors import ConfigError

if TYPE_CHECKING:
    from obstore.store import ClientConfig, S3Config

log = logging.getLogger(__name__)

SCHEME = "s3://"
PUT_ATTEMPTS = 3
FIRST_BACKOFF_SECONDS = 0.2
REQUEST_TIMEOUT_SECONDS = 30


def is_url(location: object) -> bool:
    """Whether ``location`` names a bucket (``s3://...``) rather than a local folder."""
    return isinstance(location, str) and location.startswith(SCHEME)


def split_url(url: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> ``("bucket", "a/b")``.

    Raises:
        ValueError: not an ``s3://bucket[/prefix]`` URL.
    """
    if not is_url(url):
        raise ValueError(f"not an s3://bucket/prefix URL: {url!r}")
    bucket, _, prefix = url.removeprefix(SCHEME).partition("/")
    if not bucket:
        raise ValueError(f"no bucket in {url!r}")
    return bucket, prefix.strip("/")


@dataclass
class StoreSettings:
    """What reaches a bucket beyond its URL; every None falls back to the ``AWS_*`` environment."""

    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None

    def obstore_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {}
        if self.endpoint is not None:
            config["endpoint"] = self.endpoint
        if self.region is not None:
            config["region"] = self.region
        if self.access_key_id is not None:
            config["access_key_id"] = self.access_key_id
        if self.secret_access_key is not None:
            config["secret_access_key"] = self.secret_access_key
        return config

    def polars_options(self) -> dict[str, str]:
        """The same settings as polars' ``storage_options`` (empty: polars reads the environment too)."""
        names = {
            "endpoint": "aws_endpoint_url",
            "region": "aws_region",
            "access_key_id": "aws_access_key_id",
            "secret_access_key": "aws_secret_access_key",
        }
        return {names[k]: v for k, v in self.obstore_config().items()}


@dataclass
class Bucket:
    """One ``s3://bucket/prefix``: put, list and get objects by key relative to the prefix.

    Attributes:
        url: the ``s3://bucket/prefix`` it was opened on.
        put_retries: PUTs tried again after a failure.
        put_failures: PUTs given up after ``PUT_ATTEMPTS`` failures.
    """

    url: str
    settings: StoreSettings = field(default_factory=StoreSettings)
    put_retries: int = 0
    put_failures: int = 0
    _store: Any = None

    def __post_init__(self) -> None:
        try:
            from obstore.store import S3Store
        except ImportError:
            raise ConfigError(
                f"{self.url}: a bucket archive needs obstore: pip install 'spanwatch[s3]'"
            ) from None

        bucket, prefix = split_url(self.url)
        endpoint = self.settings.endpoint or os.environ.get("AWS_ENDPOINT_URL")
        client: dict[str, Any] = {"timeout": f"{REQUEST_TIMEOUT_SECONDS}s"}
        if endpoint is not None and endpoint.startswith("http://"):
            client["allow_http"] = True
        self._store = S3Store(
            bucket,
            prefix=prefix or None,
            config=cast("S3Config", self.settings.obstore_config()),
            client_options=cast("ClientConfig", client),
            retry_config={"max_retries": 0},
        )

    def put(self, key: str, data: bytes, sleep: Any = time.sleep) -> None:
        """Upload ``data`` as ``key``, retried with backoff; every retry and give-up counted.

        Raises:
            OSError: the upload failed ``PUT_ATTEMPTS`` times (the caller keeps its rows for the next try).
        """
        import obstore

        delay = FIRST_BACKOFF_SECONDS
        for attempt in range(1, PUT_ATTEMPTS + 1):
            try:
                obstore.put(self._store, key, data)
                return
            except Exception as e:  # obstore raises its own error classes for HTTP and I/O failures
                if attempt == PUT_ATTEMPTS:
                    self.put_failures += 1
                    raise OSError(f"upload of {self.url}/{key} failed {attempt} times: {e}") from e
                self.put_retries += 1
                log.warning("upload of %s/%s failed (attempt %d), retrying: %s", self.url, key, attempt, e)
                sleep(delay)
                delay *= 2

    def objects(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        """Every ``(key, size)`` under ``prefix`` (relative to the bucket URL's prefix)."""
        import obstore

        for chunk in obstore.list(self._store, prefix=prefix or None):
            for meta in chunk:
                yield str(meta["path"]), int(meta["size"])

    def get(self, key: str) -> bytes:
        import obstore

        return bytes(obstore.get(self._store, key).bytes())
