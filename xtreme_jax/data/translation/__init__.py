"""Translation data: WMT14 (TFDS or text files) and its training batches, XTREME's translate-train /
translate-test / pseudo-test files."""
