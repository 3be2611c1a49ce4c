"""HTTP basic auth against the bcrypt hashes of ``web.yml``'s ``basic_auth_users``.

bcrypt is slow on purpose (about 70 ms at cost 10, more above), so checks run off the event loop, one at a
time, on a thread of their own (the exporter-toolkit serialises them under a mutex): a brute force then
costs at most one core and never queues ahead of gzip or archive flushes, which have their own workers.
Results are cached, failures too, keyed by a SHA-256 of user and password (a user's hash is fixed for
the checker's life: a reload builds a new one), so a scraper pays the bcrypt cost once, and a guess
repeated costs nothing. At most ``MAX_WAITING`` checks wait for the bcrypt
thread; beyond that a request is refused at once, so a flood of guesses cannot hold sockets and tasks
for minutes. An unknown user still pays a full bcrypt check so response times do not reveal which user
names exist. Passwords are never logged or kept in clear.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

import bcrypt

CHALLENGE = 'Basic realm="spanwatch", charset="UTF-8"'
"""The ``WWW-Authenticate`` value of a 401."""

CACHE_SIZE = 1024  # remembered (user, hash, password) results, oldest forgotten first
MAX_WAITING = 16  # checks queued for the bcrypt thread (16 x 70 ms: about a second of waiting at most)


def parse_basic(header: str | None) -> tuple[str, bytes] | None:
    """Split an ``Authorization: Basic ...`` header into user and password.

    Args:
        header: the header's value, or None when absent.

    Returns:
        ``(user, password bytes)``, or None when the header is absent or malformed.
    """
    if header is None:
        return None
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, sep, password = decoded.partition(b":")
    if not sep:
        return None
    try:
        return user.decode("utf-8"), password
    except UnicodeDecodeError:
        return None


class BasicAuth:
    """Checks credentials against bcrypt hashes: serialised on one thread, results cached."""

    def __init__(self, users: Mapping[str, str]) -> None:
        """Prepare the checker.

        Args:
            users: user name -> bcrypt hash (already validated by ``webconfig``); must not be empty.
        """
        self._hashes = {user: h.encode() for user, h in users.items()}
        # Any real hash of the file: checking an unknown user against it costs the same as a real check.
        self._decoy = next(iter(self._hashes.values()))
        self._results: OrderedDict[bytes, bool] = OrderedDict()
        self._waiting = 0
        self.refused = 0  # checks refused because too many were waiting
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bcrypt")

    async def check(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header carries valid credentials.

        Args:
            header: the header's value, or None.

        Returns:
            True for a known user with the right password.
        """
        creds = parse_basic(header)
        if creds is None:
            return False
        user, password = creds
        known = user in self._hashes
        hashed = self._hashes.get(user, self._decoy)
        name = user.encode()
        key = hashlib.sha256(len(name).to_bytes(4, "big") + name + password).digest()
        cached = self._results.get(key)
        if cached is not None:
            self._results.move_to_end(key)
            return cached and known
        if self._waiting >= MAX_WAITING:
            self.refused += 1
            return False
        self._waiting += 1
        try:
            loop = asyncio.get_running_loop()
            ok = await loop.run_in_executor(self._pool, _checkpw, password, hashed) and known
        finally:
            self._waiting -= 1
        self._results[key] = ok
        if len(self._results) > CACHE_SIZE:
            self._results.popitem(last=False)
        return ok

    def close(self) -> None:
        """Let the bcrypt thread go (a check in progress finishes)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def _checkpw(password: bytes, hashed: bytes) -> bool:
    try:
        return bcrypt.checkpw(password, hashed)
    except ValueError:  # e.g. a NUL byte in the password: never valid
        return False
