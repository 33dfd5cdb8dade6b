"""A redis-server of a test's own, on a free port, that the test stops and starts at will.

Never the shared Redis: stopping that would break every other process using it. The data
directory survives a stop (an RDB file written at shutdown), as with a restarted service.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import redis

from tests.conftest import free_port


class RedisServer:
    def __init__(self) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="caesura-redis-"))
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.dir),
            ]
            + ["--save", "3600 1", "--appendonly", "no", "--protected-mode", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if client.ping():
                    return
            except redis.exceptions.RedisError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def stop(self) -> None:
        """What a service restart does: SIGTERM, the data saved, every connection closed."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def freeze(self) -> None:
        """Redis stops answering (SIGSTOP): connections stay open, replies wait, as in a
        stall of the server or the network."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def remove(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.thaw()  # a stopped process does not act on SIGTERM
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
