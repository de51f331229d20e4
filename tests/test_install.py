"""The install: one distribution per import package (no t5 nightlies over seqio / TFDS), a wheel that carries
its Gin configs and sample data and works from another directory, dependency bounds no lower than the APIs we use."""

import ast
import glob
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

TIER = "integration"  # conftest.py: this file's tier

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("package", ["seqio", "tensorflow_datasets", "jax", "flax", "xtreme_jax", "xtreme_tasks"])
def test_one_distribution_per_import_package(package):
  owners = importlib.metadata.packages_distributions().get(package, [])
  assert len(set(owners)) == 1, f"{package} is provided by {owners}"


def test_tasks_are_importable_under_their_own_name():
  import xtreme_tasks
  assert xtreme_tasks.__file__.endswith("tasks/__init__.py")


# --- the wheel (`pip install .`, not editable) ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
  """The project's wheel, built offline from a copy of the sources (no stale build/ of the checkout), unzipped."""
  src = tmp_path_factory.mktemp("src")
  for name in ("pyproject.toml", "README.md"):
    shutil.copy(os.path.join(ROOT, name), src)
  for name in ("xtreme_jax", "tasks", "gin_configs"):
    shutil.copytree(os.path.join(ROOT, name), src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
  dist = tmp_path_factory.mktemp("dist")
  subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "--no-index",
                  "-q", "-w", str(dist)], check=True, timeout=300, capture_output=True)
  (path,) = glob.glob(str(dist / "*.whl"))
  site = tmp_path_factory.mktemp("site")
  with zipfile.ZipFile(path) as z:
    z.extractall(site)
    return set(z.namelist()), str(site)


def _files(folder: str, pattern: str = "**/*") -> list[str]:
  root = os.path.join(ROOT, folder)
  return [os.path.relpath(p, root) for p in glob.glob(os.path.join(root, pattern), recursive=True)
          if os.path.isfile(p) and "__pycache__" not in p]


def test_wheel_carries_gin_configs_sample_data_tasks_and_every_module(wheel):
  names, site = wheel
  expected = ([f"xtreme_jax/gin_configs/{f}" for f in _files("gin_configs", "**/*.gin")]
              + [f"xtreme_jax/sample_data/{f}" for f in _files("xtreme_jax/sample_data")]
              + [f"xtreme_jax/{f}" for f in _files("xtreme_jax", "**/*.py")]
              + [f"xtreme_tasks/{f}" for f in _files("tasks", "**/*.py")])
  assert len(expected) > 100 and not set(expected) - names, sorted(set(expected) - names)[:10]
  (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
  assert "xtreme-jax = xtreme_jax.cli:main" in open(os.path.join(site, entry_points)).read()


INSTALLED = """
import contextlib, io, json, sys
sys.path.insert(0, sys.argv[1])  # the unzipped wheel, ahead of the editable install of the checkout
import gin
import xtreme_jax
from xtreme_jax import cli, main
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
  cli.main(["run", "--help"])
main.parse_gin(["experiments/xtreme_quickstart.gin"], [])
macros = {m: gin.query_parameter("%" + m).scoped_configurable_fn() for m in ("DATA_DIR", "LABELS_DIR", "VOCAB")}
print(json.dumps({"package": xtreme_jax.__file__, "gin_dir": main.GIN_DIR, "help": out.getvalue(), **macros}))
"""


def test_installed_wheel_finds_configs_and_sample_data_from_another_directory(wheel, tmp_path):
  _, site = wheel
  proc = subprocess.run([sys.executable, "-I", "-c", INSTALLED, site], cwd=tmp_path, capture_output=True, text=True,
                        timeout=120)
  assert proc.returncode == 0, proc.stderr[-3000:]
  got = json.loads(proc.stdout.splitlines()[-1])
  assert got["package"].startswith(site) and got["gin_dir"] == os.path.join(site, "xtreme_jax", "gin_configs")
  assert "experiments/xtreme_quickstart.gin" in got["help"] and "experiments/pretrain_sample.gin" in got["help"]
  sample = os.path.join(site, "xtreme_jax", "sample_data")
  assert got["DATA_DIR"] == os.path.join(sample, "xtreme") and os.path.isdir(got["DATA_DIR"])
  assert got["LABELS_DIR"] == os.path.join(sample, "xtreme_labels") and os.path.isdir(got["LABELS_DIR"])
  assert got["VOCAB"] == os.path.join(sample, "sample_spm.model") and os.path.isfile(got["VOCAB"])


# --- dependency bounds -------------------------------------------------------------------------------------------

# The first release of each dependency that has what the code uses, or that works beside the rest: read from the
# releases, and checked by running tests/test_networks.py, test_training.py, test_seqio_tasks.py, test_xtreme_tfds.py,
# test_data.py, test_cli.py, test_gin_configs.py and this file with exactly these versions installed (Python 3.11).
# A declared bound below one of these lets pip keep an older install that fails.
API_MINIMUMS = {
    "jax": ("0.7.1", "jax.set_mesh"),
    "flax": ("0.11.2", "nn.with_logical_constraint under jax.set_mesh (earlier: only the legacy `with mesh:`)"),
    "optax": ("0.2.5", "optax.tree.norm"),
    "orbax-checkpoint": ("0.11.17", "earlier releases fail to import with jax 0.7 (layout.DeviceLocalLayout)"),
    "numpy": ("1.26", "jax 0.7"),
    "seqio": ("0.0.20", "0.0.19 pins tfds-nightly (a second tensorflow_datasets) and protobuf<=3.20.3"),
    "tensorflow-datasets": ("4.9.7", "4.9.6 imports the undeclared importlib_resources"),
    "tensorflow": ("2.20", "earlier releases cap protobuf below the 6.31 tensorflow-metadata 1.21 needs"),
    "tensorflow-text": ("2.20", "the tensorflow it pairs with"),
    "protobuf": ("6.31.1", "tensorflow-metadata 1.21's generated code"),
    "tokenizers": ("0.19.1", "reads the XLM-R tokenizer.json that transformers 5 writes (0.15 cannot)"),
    "sacrebleu": ("2.2.1", "2.x metric API and signatures; before 2.2 an empty reference segment raises"),
}


@pytest.fixture(scope="module")
def project():
  with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    return tomllib.load(f)["project"]


def _lower_bound(requirement: Requirement):
  bounds = [Version(s.version) for s in requirement.specifier if s.operator in (">=", "==", "~=")]
  return max(bounds, default=None)


def test_declared_lower_bounds_are_no_lower_than_the_api_minimums(project):
  declared = {canonicalize_name(r.name): r for r in map(Requirement, project["dependencies"])}
  for name, (minimum, why) in API_MINIMUMS.items():
    bound = _lower_bound(declared[name])
    assert bound is not None and bound >= Version(minimum), f"{name}: declared {declared[name]}, needs >={minimum}: {why}"
  assert "tensorboardx" not in declared  # metrics go through clu's writer interface
  assert Version(project["requires-python"].lstrip(">=")) >= Version("3.11")  # jax 0.7
  extras = project["optional-dependencies"]
  assert any(Requirement(r).name == "torch" for r in extras["torch"])
  tensorboard = {canonicalize_name(Requirement(r).name): r for r in extras["tensorboard"]}
  assert _lower_bound(Requirement(tensorboard["clu"])) >= Version("0.0.11")  # 0.0.10 pins numpy==1.23.1


def test_tfds_build_extra_declares_what_preparing_the_xtreme_builders_needs(project):
  """`tfds build` imports apache-beam; TFDS >= 4.9 needs importlib_resources (undeclared on Python >= 3.9);
  xtreme_pos / universal_dependencies parse CoNLL-U with conllu >= 4 (`token["upos"]`)."""
  extras = project["optional-dependencies"]
  build = {canonicalize_name(Requirement(r).name): Requirement(r) for r in extras["tfds-build"]}
  assert {"apache-beam", "importlib-resources", "conllu"} <= set(build)
  assert _lower_bound(build["conllu"]) >= Version("4")
  pretraining = {canonicalize_name(Requirement(r).name) for r in extras["tfds-build-pretraining"]}
  assert {"xtreme-jax", "apache-beam", "gcld3"} <= pretraining


def test_installed_versions_satisfy_the_declared_requirements(project):
  for requirement in map(Requirement, project["dependencies"]):
    installed = importlib.metadata.version(requirement.name)
    assert requirement.specifier.contains(installed, prereleases=True), f"{requirement.name} {installed}: {requirement}"


def _imported_top_level_modules() -> set[str]:
  names = set()
  for path in glob.glob(os.path.join(ROOT, "xtreme_jax", "**", "*.py"), recursive=True) + glob.glob(
      os.path.join(ROOT, "tasks", "**", "*.py"), recursive=True):
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        names.update(alias.name.split(".")[0] for alias in node.names)
      elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        names.add(node.module.split(".")[0])
  return names - set(sys.stdlib_module_names) - {"__future__", "xtreme_jax", "xtreme_tasks"}


def test_every_imported_package_is_declared(project):
  """tensorflow / tensorflow_text are imported by our code, so declared by us (not only reached through seqio)."""
  declared = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
  declared |= {canonicalize_name(Requirement(r).name)
               for extra, requirements in project["optional-dependencies"].items() if extra != "test"
               for r in requirements}
  owners = importlib.metadata.packages_distributions()
  modules = _imported_top_level_modules()
  assert {"jax", "tensorflow", "tensorflow_text", "seqio"} <= modules
  for module in sorted(modules):
    distributions = {canonicalize_name(d) for d in owners.get(module, [])} or {canonicalize_name(module)}  # optional
    assert distributions & declared, f"{module} is imported but none of {sorted(distributions)} is declared"


def test_package_version_is_the_project_version(project):
  import xtreme_jax
  assert xtreme_jax.__version__ == project["version"]
