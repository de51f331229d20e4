"""Every bundled sample run, run as bundled, learns (`sample_runs.SAMPLES`: what each checks).

Tier `samples`, left out of the default run (about 10 minutes on 2 cores): `python -m pytest -m samples
--dist load` (`--dist load` spreads the runs over both workers; the costliest first). The default run checks
the same on the XTREME quickstart, the WMT, mBERT paper and language-ID samples as bundled (their own tests), on
shortened runs of the others, and on a miniature lab."""

import pytest

import sample_runs


@pytest.mark.samples
@pytest.mark.parametrize("gin_file", sorted(sample_runs.SAMPLES, key=lambda f: f != "lab_quickstart.gin"))
def test_sample_run_learns(gin_file, tmp_path):
  sample_runs.run_sample(gin_file, tmp_path)
  sample_runs.SAMPLES[gin_file](tmp_path)
