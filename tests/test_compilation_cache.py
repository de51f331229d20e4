"""The persistent compilation cache: where it lives, how it is turned off, and that runs write and read it."""

import os
import subprocess
import sys
import textwrap

import gin
import jax
import pytest

from xtreme_jax import compilation_cache as cc, errors, main

TIER = "unit"  # conftest.py: this file's tier

SETTINGS = ("jax_enable_compilation_cache", "jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
            "jax_compilation_cache_max_size")


@pytest.fixture
def jax_settings(monkeypatch):
  """JAX's cache settings as the test session set them, restored after; no XTREME_JAX_CACHE_DIR."""
  monkeypatch.delenv(cc.ENV, raising=False)
  saved = {name: getattr(jax.config, name) for name in SETTINGS}
  yield saved
  for name, value in saved.items():
    jax.config.update(name, value)


def test_the_folder_comes_from_gin_then_the_environment_then_jax_then_the_default(jax_settings, monkeypatch,
                                                                                    tmp_path):
  assert cc.resolve("/from/gin") == "/from/gin"
  monkeypatch.setenv(cc.ENV, "/from/env")
  assert cc.resolve("/from/gin") == "/from/gin" and cc.resolve() == "/from/env"
  assert cc.resolve("off") is None and cc.resolve("OFF") is None
  monkeypatch.setenv(cc.ENV, "off")
  assert cc.resolve() is None and cc.resolve("gs://bucket/cache") == "gs://bucket/cache"
  monkeypatch.delenv(cc.ENV)
  assert cc.resolve() is None  # the test session gave JAX a cache folder: kept
  jax.config.update("jax_compilation_cache_dir", None)
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  assert cc.resolve() == cc.default_directory() == str(tmp_path / "xtreme_jax" / "jax")
  monkeypatch.delenv("XDG_CACHE_HOME")
  assert cc.default_directory() == os.path.expanduser("~/.cache/xtreme_jax/jax")
  with pytest.raises(errors.ConfigError, match=r"main.execute.compilation_cache = 3; expected a folder"):
    cc.resolve(3)


def test_configure_sets_jax_or_turns_the_cache_off(jax_settings, tmp_path):
  assert cc.configure() == jax_settings["jax_compilation_cache_dir"]  # JAX's own setting: left alone
  assert jax.config.jax_persistent_cache_min_compile_time_secs == jax_settings[
      "jax_persistent_cache_min_compile_time_secs"]
  assert cc.configure(str(tmp_path)) == str(tmp_path)
  assert (jax.config.jax_compilation_cache_dir, jax.config.jax_persistent_cache_min_compile_time_secs,
          jax.config.jax_compilation_cache_max_size) == (str(tmp_path), cc.MIN_COMPILE_SECS, cc.MAX_BYTES)
  assert cc.configure("gs://bucket/cache") == "gs://bucket/cache"
  assert jax.config.jax_compilation_cache_max_size == -1  # no size limit (no file lock) on a bucket
  assert cc.configure("off") is None and not jax.config.jax_enable_compilation_cache


def test_the_run_command_hands_the_gin_binding_to_the_cache(monkeypatch, tmp_path):
  seen = []

  def configure(setting=None):
    seen.append(setting)
    raise errors.ConfigError("stop here")

  monkeypatch.setattr(cc, "configure", configure)
  gin.clear_config(clear_constants=True)
  try:
    with pytest.raises(errors.ConfigError, match="stop here"):
      main.main(["--gin_file=experiments/pretrain_sample.gin", f"--gin.RUN_DIR='{tmp_path}'",
                 "--gin.main.execute.compilation_cache='off'"])
  finally:
    gin.clear_config(clear_constants=True)
  assert seen == ["off"]


def _compile_in_a_new_process(env: dict) -> None:
  code = textwrap.dedent("""
      import jax
      from xtreme_jax import compilation_cache
      compilation_cache.configure()
      jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)  # a tiny program, written anyway
      print(jax.jit(lambda x: x * 3 + 1)(2))
  """)
  env = {k: v for k, v in {**os.environ, **env}.items() if not k.startswith("JAX_COMPILATION_CACHE")}
  out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
  assert out.returncode == 0 and out.stdout.strip() == "7", out.stderr


def test_a_new_process_writes_the_default_folder_unless_turned_off(tmp_path):
  _compile_in_a_new_process({"XDG_CACHE_HOME": str(tmp_path / "xdg")})
  assert os.listdir(tmp_path / "xdg" / "xtreme_jax" / "jax")
  _compile_in_a_new_process({"XDG_CACHE_HOME": str(tmp_path / "off"), cc.ENV: "off"})
  assert not (tmp_path / "off").exists()
