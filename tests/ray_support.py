"""One local Ray per test module (2 CPUs), shut down after it, so no raylet outlives the tests.

Whether Ray can start is first tried in a child process: on a 2-core machine at a load of 15-20 the raylet
gives up waiting for its agent ("timed out during startup"), and a failed start inside the test process
would leave its half-started processes' handles behind. Then the tests are expected failures, saying why.
The probe passing does not promise the next start (CI, 2026-12-04: the probe started, then the module's own
``ray.init`` timed out waiting for its GCS port file and left a process whose handle warned in a later
test): a failed start here is shut down, tried once more, then the tests are expected failures too.

``ray.shutdown()`` kills the processes it started and waits at most a second for each (ray's
``Node._kill_process_impl``); on a loaded machine one is left unreaped, and its ``Popen`` handle warns
(``ResourceWarning: subprocess ... is still running``) whenever the garbage collector meets it, which
pytest raised in the setup of the next module's first test (CI, 2026-12-07). So each shutdown and a
garbage collection right after it run with that warning ignored, as ``distributed.start_local`` does.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

PROBE = "import ray; ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False); ray.shutdown()"


@pytest.fixture(scope="module")
def ray_session() -> Iterator[None]:
    ray = pytest.importorskip("ray", reason="the Ray engine's extra: pip install spanwatch[ray]")
    probe = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.xfail(f"a local Ray did not start on this machine: {last}")
    for attempt in (1, 2):
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            break
        except (RuntimeError, ConnectionError, TimeoutError) as e:
            _shut_down(ray)  # the half-started processes go with their handles
            if attempt == 2:
                pytest.xfail(f"a local Ray did not start on this machine twice: {e}")
    try:
        yield
    finally:
        _shut_down(ray)


def _shut_down(ray: Any) -> None:
    with warnings.catch_warnings():  # the killed processes' handles (module docstring)
        warnings.simplefilter("ignore", ResourceWarning)
        ray.shutdown()
        gc.collect()
