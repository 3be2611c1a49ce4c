"""An archive named by a local path or an ``s3://bucket/prefix`` URL, read as a local folder.

The analysis already copies the readings it needs into ``TMPDIR`` (``analyzer.spill``) before it works, so
a bucket is read the same way: its data files of the hours asked for are downloaded once into a temporary
folder that keeps the archive's layout (``shard=``, ``date=``, ``hour=``), and every reader then works on
that folder unchanged. ``Mirror.sync`` downloads only the objects it has not seen, which ``spanwatch
follow`` calls on every read. Files are immutable once visible, so a key seen once is done with.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from analyzer.errors import InputError
from collector import storage
from collector.contracts import archive as layout


def location(text: str) -> Path | str:
    """An ``--archive`` option: the URL as given for a bucket, else a local path."""
    return text if storage.is_url(text) else Path(text)


def _hour_of_key(key: str) -> str:
    return layout.hour_of(Path(key))


class Mirror:
    """A local copy of a bucket archive's data files, filled on demand.

    Args:
        url: ``s3://bucket/prefix``.
        folder: where the copy is kept (the archive's layout below it).
        bucket: the bucket client (default: settings from the ``AWS_*`` environment).
    """

    def __init__(self, url: str, folder: Path, bucket: storage.Bucket | None = None) -> None:
        self.url = url
        self.folder = folder
        self.bucket = bucket or storage.Bucket(url)
        self._copied: set[str] = set()
        self.bytes_copied = 0

    def sync(self, start: datetime | None = None, end: datetime | None = None) -> list[Path]:
        """Download the data files of ``[start, end)``'s hours not copied yet.

        Returns:
            The new local files.

        Raises:
            InputError: the bucket cannot be listed or read.
        """
        low = start.strftime("%Y-%m-%dT%H") if start is not None else ""
        high = end.strftime("%Y-%m-%dT%H") if end is not None else "~"
        new = []
        try:
            for key, size in sorted(self.bucket.objects()):
                if key in self._copied or not layout.is_data_key(key):
                    continue
                if not low <= _hour_of_key(key) <= high:
                    continue
                target = self.folder / key
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(self.bucket.get(key))
                self._copied.add(key)
                self.bytes_copied += size
                new.append(target)
        except OSError as e:
            raise InputError(self.url, f"archive bucket unreadable: {e}") from None
        except Exception as e:  # obstore's errors for an unknown bucket, refused credentials, ...
            raise InputError(self.url, f"archive bucket unreadable: {type(e).__name__}: {e}") from None
        return new


@contextmanager
def local_folder(
    archive: Path | str, start: datetime | None = None, end: datetime | None = None
) -> Iterator[Path]:
    """The archive as a local folder for the duration of the block.

    Args:
        archive: a local folder (yielded as is) or an ``s3://bucket/prefix`` URL (copied into ``TMPDIR``).
        start: first time needed, or None.
        end: first time not needed, or None.
    """
    if not storage.is_url(archive):
        yield Path(archive)
        return
    with tempfile.TemporaryDirectory(prefix="spanwatch-archive-") as folder:
        Mirror(str(archive), Path(folder)).sync(start, end)
        yield Path(folder)
