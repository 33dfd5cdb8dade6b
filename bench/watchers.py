"""Watchers of one session for bench/desk.py: ``n`` websocket clients over real TCP
connections to daphne, logged in by a session cookie as a browser's socket is, that stamp
every message as it arrives.

They stand in for reviewers' browsers, which run on other machines: here they share the
stack's two cores, so what they spend a message slows the generation they measure. They
are therefore one thread that waits on all sockets at once (``selectors``) and reads
RFC 6455 frames itself: the ``websockets`` package cost about 0.1 ms of CPU a message and
socket (some 2 ms a token for 20 of them, a tenth of a step), this about a tenth of that."""

from __future__ import annotations

import base64
import json
import os
import selectors
import socket
import threading
import time
import urllib.parse

TEXT, CONTINUATION, CLOSE, PING = 0x1, 0x0, 0x8, 0x9
SELECT_S = 0.1  # how often the thread looks whether it was asked to stop


class Watchers(threading.Thread):
    """Every message each client receives: ``raw[i]`` lists ``(time.time(), text)``, stamped
    as its last byte is read (parsed afterwards by the caller)."""

    def __init__(self, url: str, session: int, cookie: str, n: int) -> None:
        super().__init__(daemon=True)
        self.url, self.path = url, f"/ws/sessions/{session}/"
        self.cookie, self.n = cookie, n
        self.raw: list[list[tuple[float, str]]] = [[] for _ in range(n)]
        self.connected = threading.Event()
        self.error: BaseException | None = None
        self._stopping = threading.Event()

    def run(self) -> None:
        try:
            clients = [Client(*connect(self.url, self.path, self.cookie)) for _ in range(self.n)]
        except BaseException as exc:  # reported to the bench's thread
            self.error = exc
            self.connected.set()
            return
        self.connected.set()
        with selectors.DefaultSelector() as selector:
            for i, client in enumerate(clients):
                client.sock.setblocking(False)
                selector.register(client.sock, selectors.EVENT_READ, i)
            while not self._stopping.is_set() and selector.get_map():
                for key, _ in selector.select(SELECT_S):
                    client = clients[key.data]
                    if not client.read(self.raw[key.data]):
                        selector.unregister(client.sock)
        for client in clients:
            client.sock.close()

    def stop(self) -> None:
        self._stopping.set()
        self.join(30)

    def messages(self) -> list[list[tuple[float, dict]]]:
        return [[(at, json.loads(raw)) for at, raw in client] for client in self.raw]


def connect(url: str, path: str, cookie: str) -> tuple[socket.socket, bytes]:
    """An opened websocket (the handshake done) and the bytes read past the handshake."""
    parts = urllib.parse.urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    sock = socket.create_connection((host, port), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Origin: {url}\r\nCookie: {cookie}\r\n\r\n"
    )
    sock.sendall(request.encode())
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError(f"{url}{path} closed the connection during the handshake")
        received += chunk
    head, _, rest = received.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0]
    if b" 101 " not in status + b" ":
        raise ConnectionError(f"{url}{path} refused the websocket: {status.decode()}")
    return sock, rest


class Client:
    """One socket's frames, read as they come (the server's frames are not masked)."""

    def __init__(self, sock: socket.socket, pending: bytes) -> None:
        self.sock = sock
        self.buffer = bytearray(pending)
        self.message = bytearray()  # a fragmented message's parts so far

    def read(self, into: list[tuple[float, str]]) -> bool:
        """Read what arrived and append each complete message; False once closed."""
        try:
            chunk = self.sock.recv(1 << 16)
        except BlockingIOError:
            return True
        except OSError:
            return False
        at = time.time()
        if not chunk:
            return False
        self.buffer += chunk
        while (frame := self._frame()) is not None:
            opcode, fin, payload = frame
            if opcode == CLOSE:
                return False
            if opcode == PING:
                self.sock.sendall(masked(0xA, payload))  # a pong, so the server keeps us
            elif opcode in (TEXT, CONTINUATION):
                self.message += payload
                if fin:
                    into.append((at, self.message.decode()))
                    self.message = bytearray()
        return True

    def _frame(self) -> tuple[int, bool, bytes] | None:
        buffer = self.buffer
        if len(buffer) < 2:
            return None
        fin, opcode, length, start = buffer[0] & 0x80, buffer[0] & 0x0F, buffer[1] & 0x7F, 2
        if length == 126:
            length, start = int.from_bytes(buffer[2:4], "big"), 4
        elif length == 127:
            length, start = int.from_bytes(buffer[2:10], "big"), 10
        if len(buffer) < start or len(buffer) < start + length:
            return None
        payload = bytes(buffer[start : start + length])
        del buffer[: start + length]
        return opcode, bool(fin), payload


def masked(opcode: int, payload: bytes) -> bytes:
    """A client's frame: always masked (RFC 6455 §5.3); control frames are short."""
    mask = os.urandom(4)
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + body
