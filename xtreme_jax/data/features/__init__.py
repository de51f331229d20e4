"""Model features of task examples (classification, QA windows, tagging windows, parsing), masking, packing
and the batch sources the trainer reads."""
