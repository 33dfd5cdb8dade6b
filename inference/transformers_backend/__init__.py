"""The transformers backend: the reference engine over a local transformers model.

    from inference.loader import load_engine   # or load_backend("transformers", path)

Modules: ``engine`` (Engine: the run loop, rollbacks, snapshots, edits, attention),
``runner`` (ModelRunner: the model-specific forward passes), ``kv_cache`` (the in-place
KV cache, and its static block for the compiled step), ``step_graph`` and ``compiled``
(the decode step as one compiled graph), ``int8`` (weight-only int8), ``settings`` (how
the step runs), ``sdpa`` (the attention function, recording live rows), ``layout`` (the
weight layout for CPU), ``attention`` (attention views and live rows), ``lookahead``
(greedy branches at a pause), ``rebuild`` (a state from a checkpoint record: one
prefill), ``loading`` (building one from a model directory). The decisions between two
tokens are inference/decode.py's, shared with the vLLM backend.
"""
