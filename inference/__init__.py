"""Caesura's decode engine: plain Python + torch + transformers, no web layer."""
