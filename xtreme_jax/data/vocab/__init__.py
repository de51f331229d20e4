"""Vocabularies (WordPiece, SentencePiece, the HF tokenizers), their seqio adapter and SentencePiece training."""
