"""The state vault: engine snapshots on disk, encrypted at rest (AES-GCM), one file per session.

The engine's snapshot format carries its own fingerprint and checksum; the vault adds
confidentiality and authenticity, and writes atomically so a crash never leaves half a file.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings

NONCE_BYTES = 12


class VaultError(RuntimeError):
    pass


class Vault:
    def __init__(self, directory: Path, secret: str) -> None:
        self.directory = directory
        self._aead = AESGCM(hashlib.sha256(secret.encode()).digest())

    def path(self, session_id: int) -> Path:
        return self.directory / f"session-{session_id}.snap"

    def put(self, session_id: int, snapshot: bytes) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        nonce = os.urandom(NONCE_BYTES)
        sealed = nonce + self._aead.encrypt(nonce, snapshot, str(session_id).encode())
        target = self.path(session_id)
        partial = target.with_suffix(".partial")
        partial.write_bytes(sealed)
        partial.replace(target)
        return target

    def get(self, session_id: int) -> bytes | None:
        target = self.path(session_id)
        if not target.exists():
            return None
        sealed = target.read_bytes()
        try:
            # The session id is bound in: a snapshot copied to another session's name is refused.
            return self._aead.decrypt(
                sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], str(session_id).encode()
            )
        except (InvalidTag, ValueError) as exc:
            raise VaultError(f"snapshot of session {session_id} failed authentication") from exc

    def discard(self, session_id: int) -> None:
        self.path(session_id).unlink(missing_ok=True)


def configured() -> Vault:
    """The vault this installation's settings name (read each time: tests override them)."""
    return Vault(settings.VAULT_DIR, settings.VAULT_KEY)
