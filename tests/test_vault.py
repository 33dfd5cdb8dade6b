import pytest

from reviewer.worker.vault import Vault, VaultError


def test_it_round_trips_a_snapshot_encrypted_at_rest(tmp_path):
    vault = Vault(tmp_path, "secret")
    payload = b"CAESURA-SNAPSHOT" + bytes(range(256)) * 10
    path = vault.put(7, payload)
    assert payload[:16] not in path.read_bytes()
    assert vault.get(7) == payload


def test_it_refuses_a_tampered_file_a_moved_file_and_another_key(tmp_path):
    vault = Vault(tmp_path, "secret")
    vault.put(7, b"state")
    sealed = bytearray(vault.path(7).read_bytes())
    sealed[-1] ^= 1
    vault.path(7).write_bytes(bytes(sealed))
    with pytest.raises(VaultError):
        vault.get(7)
    vault.put(7, b"state")
    vault.path(7).rename(vault.path(8))
    with pytest.raises(VaultError):
        vault.get(8)
    vault.put(9, b"state")
    with pytest.raises(VaultError):
        Vault(tmp_path, "other secret").get(9)


def test_it_answers_none_for_a_session_without_snapshot_and_discards(tmp_path):
    vault = Vault(tmp_path, "secret")
    assert vault.get(1) is None
    vault.put(1, b"x")
    vault.discard(1)
    assert vault.get(1) is None


def test_it_reads_a_file_sealed_in_one_piece_as_the_former_vault_wrote_it(tmp_path):
    import hashlib
    import os

    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    aead, nonce = AESGCM(hashlib.sha256(b"secret").digest()), os.urandom(12)
    (tmp_path / "session-5.snap").write_bytes(nonce + aead.encrypt(nonce, b"old state", b"5"))
    assert Vault(tmp_path, "secret").get(5) == b"old state"


def test_it_refuses_a_truncated_or_empty_file(tmp_path):
    vault = Vault(tmp_path, "secret")
    vault.put(3, b"state" * 100)
    sealed = vault.path(3).read_bytes()
    for kept in (sealed[:-1], sealed[:27], b""):
        vault.path(3).write_bytes(kept)
        with pytest.raises(VaultError):
            vault.get(3)


def test_it_round_trips_an_empty_snapshot(tmp_path):
    vault = Vault(tmp_path, "secret")
    vault.put(4, b"")
    assert vault.get(4) == b""


def test_a_snapshot_from_the_vault_restores_and_continues_as_the_paused_state(tmp_path):
    from inference.decode import RunRequest
    from inference.transformers_backend.engine import Engine
    from inference.transformers_backend.runner import ModelRunner
    from tests.inference.tiny import tiny_model, tiny_tokenizer

    tokenizer = tiny_tokenizer()
    engine = Engine(ModelRunner(tiny_model(len(tokenizer))), tokenizer)
    state = engine.start("The contract is void.", {"temperature": 0.7, "seed": 3})
    engine.run(state, RunRequest(pause_at=6))
    vault = Vault(tmp_path, "secret")
    vault.put(2, engine.snapshot(state))
    restored = engine.restore(vault.get(2))
    engine.run(restored, RunRequest(pause_at=16))
    engine.run(state, RunRequest(pause_at=16))
    assert restored.generated_ids == state.generated_ids
