"""A tiny random-weight Llama and a byte-level BPE tokenizer trained in milliseconds."""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SENTENCES = [
    "The patient should take aspirin twice a day.",
    "We recommend a follow-up visit in two weeks.",
    "This is definitely the correct diagnosis, without doubt.",
    "The contract is void. The tenant must pay rent! Is it late?",
    "Dosage: 3.5 mg per day, e.g. with food. Dr. Smith agrees.",
    '{"action": "lookup", "query": "ibuprofen"} returns a result.',
    "Hello world, hello model, hello reviewer.",
]
SPECIALS = ["<|eos|>", "<|system|>", "<|user|>", "<|assistant|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(SENTENCES * 3, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|eos|>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tiny_model(vocab_size: int, seed: int = 0, layers: int = 2) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,  # no GQA: CPU sdpa with enable_gqa is slow on tiny shapes
        max_position_embeddings=512,
        initializer_range=0.3,  # varied confidence: some steps peaked, some flat
        eos_token_id=0,
        bos_token_id=None,
        pad_token_id=None,
        tie_word_embeddings=False,
        attn_implementation="sdpa",
    )
    return LlamaForCausalLM(config).eval()
