"""Readers of the official on-disk layouts and TFDS (XTREME, XGLUE, the mBERT paper's datasets) and the
per-benchmark data objects runs and seqio tasks read through."""
