"""Caesura's decode engine: plain Python + torch + transformers, no web layer.

Layout (see CONTRACT.md):
- the core, here: ``state`` (DecodeState, Checkpoint), ``decode`` (the decision between two
  tokens, StopInfo, RunRequest, Run), ``sampler``, ``signals``, ``policies/``, ``edits``
  (edit planning), ``snapshot`` (the format), ``backend`` (the contract both backends
  satisfy), ``serving`` (one thread owns an engine), ``sink``, ``control``, ``config``,
  ``text``, ``prompt``, ``sentences``, ``safe_regex``, ``loader`` (picks a backend),
  ``preparation`` (the default model);
- ``transformers_backend/``: the reference engine over a transformers model;
- ``vllm_backend/``: the same contract over vLLM's batching;
- ``learned/``: the learned pause model (features, model, training).
The backends import the core, never each other's loader; nothing here imports the web side.
"""
