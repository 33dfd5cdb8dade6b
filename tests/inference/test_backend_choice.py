"""Choosing a backend and configuring vLLM: clear errors, no model needed."""

from __future__ import annotations

import os

import pytest

from inference.backend import HIDDEN_STATES, UnsupportedFeature, check_policies
from inference.loader import ModelNotFoundError, load_backend
from inference.policies import PolicySet
from inference.vllm_backend.settings import VllmSettings


def test_it_names_the_backends_it_knows(tmp_path):
    with pytest.raises(ValueError, match="transformers, vllm"):
        load_backend("tensorrt", tmp_path)
    with pytest.raises(ModelNotFoundError, match="config.json"):
        load_backend("vllm", tmp_path)


def test_a_backend_without_hidden_states_refuses_drift_by_name():
    policies = PolicySet.from_specs([{"name": "wander", "kind": "drift"}])
    check_policies(policies, frozenset({HIDDEN_STATES}), "transformers")
    with pytest.raises(UnsupportedFeature, match=r"vllm backend .*\(wander\)"):
        check_policies(policies, frozenset(), "vllm")


def test_vllm_settings_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("CAESURA_VLLM_MAX_MODEL_LEN", "2048")
    monkeypatch.setenv("CAESURA_VLLM_GPU_MEMORY_UTILIZATION", "0.8")
    monkeypatch.setenv("CAESURA_VLLM_ENFORCE_EAGER", "1")
    settings = VllmSettings.from_env(max_num_seqs=8)
    assert (settings.max_model_len, settings.gpu_memory_utilization) == (2048, 0.8)
    assert (settings.enforce_eager, settings.max_num_seqs) == (True, 8)


def test_vllm_runs_its_graph_mode_unless_told_and_caches_it_beside_the_compiled_step(
    monkeypatch, tmp_path
):
    from inference.vllm_backend.settings import prepare_environment

    monkeypatch.delenv("CAESURA_VLLM_ENFORCE_EAGER", raising=False)
    monkeypatch.delenv("VLLM_CACHE_ROOT", raising=False)
    monkeypatch.delenv("VLLM_USE_AOT_COMPILE", raising=False)
    monkeypatch.setenv("CAESURA_DATA_DIR", str(tmp_path))
    assert VllmSettings.from_env().enforce_eager is False
    prepare_environment()
    assert os.environ["VLLM_CACHE_ROOT"] == str(tmp_path / "compiled" / "vllm")
    assert os.environ["VLLM_USE_AOT_COMPILE"] == "0"  # its artifact does not load back


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("MAX_MODEL_LEN", "lots", "CAESURA_VLLM_MAX_MODEL_LEN='lots' is not valid"),
        ("BLOCK_SIZE", "20", "multiple of 16"),
        ("GPU_MEMORY_UTILIZATION", "1.5", r"\(0, 1\]"),
        ("ENFORCE_EAGER", "maybe", "CAESURA_VLLM_ENFORCE_EAGER='maybe' is not valid"),
    ],
)
def test_bad_vllm_settings_say_which_and_why(monkeypatch, name, value, message):
    monkeypatch.setenv(f"CAESURA_VLLM_{name}", value)
    with pytest.raises(ValueError, match=message):
        VllmSettings.from_env()
