"""The state vault: engine snapshots on disk, encrypted at rest (AES-GCM), one file per session.

The engine's snapshot format carries its own fingerprint and checksum; the vault adds
confidentiality and authenticity, and writes atomically so a crash never leaves half a file.
A file is nonce | ciphertext | tag. Reading maps the file and decrypts it in one pass into
fresh memory that the restored state then views (inference/snapshot.py): no read copy, no
copy of the plaintext, and nothing is returned before the tag has been checked.
"""

from __future__ import annotations

import hashlib
import mmap
import os
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings
from typing_extensions import Buffer

NONCE_BYTES = 12
TAG_BYTES = 16
# Fresh memory for a plaintext, its pages mapped in one go (MAP_POPULATE, where the system has
# it) rather than faulted in one by one as the decryption writes: about twice as fast here.
ANONYMOUS = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0)


class VaultError(RuntimeError):
    pass


class Vault:
    def __init__(self, directory: Path, secret: str) -> None:
        self.directory = directory
        self._aead = AESGCM(hashlib.sha256(secret.encode()).digest())

    def path(self, session_id: int) -> Path:
        return self.directory / f"session-{session_id}.snap"

    def put(self, session_id: int, snapshot: Buffer) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        nonce = os.urandom(NONCE_BYTES)
        with memoryview(snapshot) as data:
            sealed = bytearray(NONCE_BYTES + data.nbytes + TAG_BYTES)  # nonce | ciphertext | tag
            sealed[:NONCE_BYTES] = nonce
            with memoryview(sealed) as out:
                self._aead.encrypt_into(nonce, data, _bound(session_id), out[NONCE_BYTES:])
        target = self.path(session_id)
        partial = target.with_suffix(".partial")
        partial.write_bytes(sealed)
        partial.replace(target)
        return target

    def get(self, session_id: int) -> memoryview | None:
        """The snapshot, or None when the session has none; VaultError if it fails
        authentication (tampered, truncated, moved to another session's name, other key)."""
        try:
            with self.path(session_id).open("rb") as file:
                size = os.fstat(file.fileno()).st_size
                if size < NONCE_BYTES + TAG_BYTES:
                    raise VaultError(f"snapshot of session {session_id} is truncated")
                sealed = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        except FileNotFoundError:
            return None
        with sealed, memoryview(sealed) as view:
            return self._open(session_id, view)

    def _open(self, session_id: int, sealed: memoryview) -> memoryview:
        size = len(sealed) - NONCE_BYTES - TAG_BYTES
        plain = memoryview(mmap.mmap(-1, size, flags=ANONYMOUS) if size else bytearray())
        nonce = bytes(sealed[:NONCE_BYTES])
        try:  # the session id is bound in: a snapshot copied to another session's name is refused
            with sealed[NONCE_BYTES:] as data:  # released before the file's map is closed
                self._aead.decrypt_into(nonce, data, _bound(session_id), plain)
        except (InvalidTag, ValueError) as exc:
            raise VaultError(f"snapshot of session {session_id} failed authentication") from exc
        return plain

    def discard(self, session_id: int) -> None:
        self.path(session_id).unlink(missing_ok=True)


def _bound(session_id: int) -> bytes:
    """The associated data: the session the snapshot belongs to."""
    return str(session_id).encode()


def configured() -> Vault:
    """The vault this installation's settings name (read each time: tests override them)."""
    return Vault(settings.VAULT_DIR, settings.VAULT_KEY)
