"""Pretraining data: VECO's pair corpora and streams, xDAE / xFNP streams and their noise, the resume protocol
of tf.data streams."""
