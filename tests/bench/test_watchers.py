"""The desk benchmark's websocket watchers read RFC 6455 frames themselves: whole messages
out of frames cut anywhere, fragmented or long, a pong for a ping, and an end at a close."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
try:
    from watchers import Client
finally:
    sys.path.remove(str(ROOT / "bench"))


def frame(opcode: int, payload: bytes, fin: bool = True) -> bytes:
    """A server's frame: never masked."""
    head = bytes([(0x80 if fin else 0) | opcode])
    if len(payload) < 126:
        return head + bytes([len(payload)]) + payload
    return head + bytes([126]) + len(payload).to_bytes(2, "big") + payload


def unmasked(data: bytes) -> tuple[int, bytes]:
    assert data[1] & 0x80  # a client's frame is masked
    mask, body = data[2:6], data[6 : 6 + (data[1] & 0x7F)]
    return data[0] & 0x0F, bytes(b ^ mask[i % 4] for i, b in enumerate(body))


def test_it_reads_whole_messages_from_frames_cut_anywhere_and_answers_a_ping():
    server, ours = socket.socketpair()
    long_text = "é" * 200  # 400 bytes: a 16-bit length
    stream = (
        frame(0x1, b'{"seq": 1}')
        + frame(0x9, b"hi")
        + frame(0x1, b'{"seq"', fin=False)
        + frame(0x0, b": 2}")
        + frame(0x1, long_text.encode())
        + frame(0x8, b"")
    )
    client, received, open_ = Client(ours, stream[:3]), [], True
    for at in range(3, len(stream), 5):  # five bytes at a time, mid-header too
        server.sendall(stream[at : at + 5])
        open_ = client.read(received)
    assert open_ is False  # the close frame ends it
    assert [text for _, text in received] == ['{"seq": 1}', '{"seq": 2}', long_text]
    assert unmasked(server.recv(64)) == (0xA, b"hi")
    server.close()
    ours.close()


def test_it_ends_when_the_server_closes_the_connection():
    server, ours = socket.socketpair()
    server.sendall(frame(0x1, b"last"))
    server.close()
    client, received = Client(ours, b""), []
    assert client.read(received) is True and [t for _, t in received] == ["last"]
    assert client.read(received) is False
    ours.close()
