"""A slow-header flood, run as its own process as an attacker would: ``python -m
tests.integration.trickle_flood PORT COUNT SECONDS``.

``COUNT`` connections each send a request line, then one header line every 0.5 s and never finish; each is
reopened as soon as it is closed. At the end it prints how many connections it opened, as JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys


async def _one(port: int, halt: asyncio.Event, opened: list[int]) -> None:
    while not halt.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.01)
            continue
        opened[0] += 1
        try:
            writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            while not halt.is_set() and not reader.at_eof():
                writer.write(b"X-Trickle: 1\r\n")
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(reader.read(1024), 0.5)
        except OSError:
            pass
        finally:
            writer.close()


async def flood(port: int, count: int, seconds: float) -> int:
    """Run the flood for ``seconds``; the number of connections opened."""
    halt, opened = asyncio.Event(), [0]
    tasks = [asyncio.create_task(_one(port, halt, opened)) for _ in range(count)]
    await asyncio.sleep(seconds)
    halt.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return opened[0]


if __name__ == "__main__":
    port, count, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    print(json.dumps({"opened": asyncio.run(flood(port, count, seconds))}))
