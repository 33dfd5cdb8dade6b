"""A session socket whose reader takes less than the session writes (a phone on a slow
network): a real daphne, the Redis channel layer and a raw websocket client that stops
reading. The server stops sending live events once the connection's send buffer is full and,
when the reader has taken what was sent, sends the rest from the event store: nothing piles
up in the web process, and the reader still gets every event once, in order."""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
import time
import urllib.parse

import pytest

from reviewer import events
from tests.session_factory import make_session
from tests.test_idle_socket import SERVER_LOG, cookie_for, log_since

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

EVENTS = 300
ROW = "0.0123," * 3000  # about an attention row's size for a long session (21 KB)
FELL_BEHIND = "a socket fell behind"


def open_socket(server_url: str, path: str, cookie: str) -> tuple[socket.socket, bytearray]:
    """A websocket whose receive buffer is small, so that the server's fills soon."""
    parts = urllib.parse.urlsplit(server_url)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(30)
    sock.connect((parts.hostname, parts.port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Origin: {server_url}\r\nCookie: {cookie}\r\n\r\n".encode()
    )
    received = bytearray()
    while b"\r\n\r\n" not in received:
        received += sock.recv(4096)
    head, _, rest = bytes(received).partition(b"\r\n\r\n")
    assert b" 101 " in head.split(b"\r\n", 1)[0], head
    return sock, bytearray(rest)


def read_message(sock: socket.socket, buffer: bytearray) -> dict:
    """The next text message (the server's frames are unmasked and, here, unfragmented)."""

    def need(n: int) -> None:
        while len(buffer) < n:
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the server closed the socket")
            buffer.extend(chunk)

    need(2)
    opcode, length, start = buffer[0] & 0x0F, buffer[1] & 0x7F, 2
    if length == 126:
        need(4)
        length, start = struct.unpack(">H", buffer[2:4])[0], 4
    elif length == 127:
        need(10)
        length, start = struct.unpack(">Q", buffer[2:10])[0], 10
    need(start + length)
    payload = bytes(buffer[start : start + length])
    del buffer[: start + length]
    assert opcode == 0x1, f"frame opcode {opcode}"
    return json.loads(payload)


def wait_for_log(offset: int, text: str, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log_since(offset):
            return True
        time.sleep(0.1)
    return False


def test_it_paces_a_socket_whose_reader_falls_behind_and_loses_no_event(server_url, alice):
    session = make_session(alice)
    stored_before = list(events.events_after(session.pk, 0))
    offset = SERVER_LOG.stat().st_size
    path = f"/ws/sessions/{session.pk}/"
    sock, buffer = open_socket(server_url, path, cookie_for(alice))
    with sock:
        replayed = [read_message(sock, buffer) for _ in stored_before]
        assert [e["seq"] for e in replayed] == [e["seq"] for e in stored_before]
        # The reader stops reading while the session writes about 6 MB of events.
        emitted = [
            events.emit(session.pk, "token", {"text": f" t{i}", "row": ROW}).seq
            for i in range(EVENTS)
        ]
        assert wait_for_log(offset, FELL_BEHIND), "the server never noticed the slow reader"
        # Then it reads everything: each event once, in order, the last one included.
        seqs = []
        while not seqs or seqs[-1] < emitted[-1]:
            seqs.append(read_message(sock, buffer)["seq"])
    assert seqs == emitted
    log = log_since(offset)
    assert "Traceback" not in log
