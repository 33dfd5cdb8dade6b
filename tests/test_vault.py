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
