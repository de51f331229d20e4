"""Every bundled sample run, run as bundled, learns (`sample_runs.SAMPLES`: what each checks).

Marker `samples`, in no tier and left out of the default run (about 14 minutes on 2 cores): `python -m pytest
-m samples --dist load` (`--dist load` spreads the runs over both workers, the lab's, the longest, first). The
default run checks the same on the XTREME quickstart and the WMT and language-ID samples as bundled (their own
tests), on shortened runs of the others, and on a miniature lab."""

import pytest

import sample_runs


@pytest.mark.samples
@pytest.mark.parametrize("gin_file", sorted(sample_runs.SAMPLES, key=lambda f: f != "lab_quickstart.gin"))
def test_sample_run_learns(gin_file, tmp_path):
  sample_runs.run_sample(gin_file, tmp_path)
  sample_runs.SAMPLES[gin_file](tmp_path)
