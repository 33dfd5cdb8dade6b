"""The transformers backend: the reference engine over a local transformers model.

    from inference.loader import load_engine   # or load_backend("transformers", path)

Modules: ``engine`` (Engine: the run loop, rollbacks, snapshots, edits, attention),
``runner`` (ModelRunner: the model-specific forward passes), ``kv_cache`` (the in-place
KV cache), ``attention`` (attention views and live rows), ``lookahead`` (greedy branches
at a pause), ``rebuild`` (a state from a checkpoint record: one prefill), ``loading``
(building one from a model directory). The decisions between two tokens are
inference/decode.py's, shared with the vLLM backend.
"""
