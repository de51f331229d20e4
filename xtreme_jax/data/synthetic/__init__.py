"""Controlled synthetic languages for studying zero-shot cross-lingual transfer (no JAX, no TensorFlow)."""
