"""HTTP basic auth against the bcrypt hashes of ``web.yml``'s ``basic_auth_users``.

bcrypt is slow on purpose (about 70 ms at cost 10, more above), so a check runs in a worker thread, never
on the event loop that polls devices, and a successful ``(user, password)`` pair is remembered (as a
SHA-256 digest, compared in constant time) so a scraper pays the bcrypt cost once, not every scrape; the
exporter-toolkit does the same. An unknown user still pays a full bcrypt check so response times do not
reveal which user names exist. Passwords are never logged or kept in clear.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping

import bcrypt

CHALLENGE = 'Basic realm="spanwatch", charset="UTF-8"'
"""The ``WWW-Authenticate`` value of a 401."""


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
    """Checks credentials against bcrypt hashes, caching the pairs that passed."""

    def __init__(self, users: Mapping[str, str]) -> None:
        """Prepare the checker.

        Args:
            users: user name -> bcrypt hash (already validated by ``webconfig``); must not be empty.
        """
        self._hashes = {user: h.encode() for user, h in users.items()}
        # Any real hash of the file: checking an unknown user against it costs the same as a real check.
        self._decoy = next(iter(self._hashes.values()))
        self._passed: dict[str, bytes] = {}  # user -> sha256(password) of the last password that passed

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
        digest = hashlib.sha256(password).digest()
        remembered = self._passed.get(user)
        if remembered is not None and hmac.compare_digest(remembered, digest):
            return True
        known = user in self._hashes
        hashed = self._hashes.get(user, self._decoy)
        ok = await asyncio.get_running_loop().run_in_executor(None, _checkpw, password, hashed)
        if ok and known:
            self._passed[user] = digest  # bounded: one entry per configured user
            return True
        return False


def _checkpw(password: bytes, hashed: bytes) -> bool:
    try:
        return bcrypt.checkpw(password, hashed)
    except ValueError:  # e.g. a NUL byte in the password: never valid
        return False
