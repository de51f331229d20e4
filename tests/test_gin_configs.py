"""Every experiment Gin file parses (all bindings valid) once its required macros are given."""

import glob
import os
import re

import gin
import pytest

from xtreme_jax import errors, main

import sample_runs

TIER = "unit"  # conftest.py: this file's tier

EXPERIMENTS = sorted(os.path.relpath(p, main.GIN_DIR)
                     for p in glob.glob(os.path.join(main.GIN_DIR, "experiments", "*.gin")))
REQUIRED = {  # macros each experiment leaves to the command line
    "experiments/finetune_classification.gin": ["DATA_DIR='d'", "TRAIN_FILE='t'", "EVAL_FILE='e'", "VOCAB='v'",
                                                "INIT_CHECKPOINT='c'", "RUN_DIR='r'"],
    "experiments/evaluate_classification.gin": ["DATA_DIR='d'", "EVAL_FILE='e'", "VOCAB='v'", "RUN_DIR='r'"],
    "experiments/veco_pretrain.gin": ["MONO_DIR='m'", "VOCAB='v'", "RUN_DIR='r'"],
    "experiments/veco_pretrain_wiki40b.gin": ["VOCAB='v'", "RUN_DIR='r'"],
    "experiments/xglue_tiny.gin": ["DATA_DIR='d'", "VOCAB='v'", "RUN_DIR='r'"],
    "experiments/xglue_veco_large_generation.gin": ["DATA_DIR='d'", "RUN_DIR='r'"],
    "experiments/xdae_pretrain.gin": ["VOCAB='v'", "INIT_CHECKPOINT='c'", "RUN_DIR='r'"],
    "experiments/xfnp_pretrain.gin": ["VOCAB='v'", "RUN_DIR='r'"],
    "experiments/xtreme_filter_xlmr_large.gin": ["DATA_DIR='d'", "RUN_DIR='r'"],
    "experiments/xtreme_filter_grid.gin": ["DATA_DIR='d'", "RUN_DIR='r'"],
    "experiments/xglue_filter_xlmr_large.gin": ["DATA_DIR='d'", "RUN_DIR='r'"],
    "experiments/xglue_unicoder_xdae_generation.gin": ["DATA_DIR='d'", "VOCAB='v'", "RUN_DIR='r'"],
    "experiments/xglue_unicoder_xfnp_generation.gin": ["DATA_DIR='d'", "VOCAB='v'", "RUN_DIR='r'"],
    "experiments/mbert_language_id.gin": ["DATA_DIR='d'", "RUN_DIR='r'"],
    "experiments/mbert_paper_mbert.gin": ["DATA_DIR='d'", "RUN_DIR='r'"],
    "experiments/mbert_paper_feature_based.gin": ["DATA_DIR='d'", "RUN_DIR='r'"],
    "experiments/mbert_paper_xnli.gin": ["DATA_DIR='d'", "RUN_DIR='r'"],
    "experiments/mbert_paper_grid.gin": ["DATA_DIR='d'", "RUN_DIR='r'"],
    "experiments/mbert_paper_xnli_grid.gin": ["DATA_DIR='d'", "RUN_DIR='r'"],
    "experiments/mbert_paper_xnli_feature_based.gin": ["DATA_DIR='d'", "RUN_DIR='r'"],
}
REAL_DATA = ["DATA_DIR='d'", "RUN_DIR='r'"]  # the benchmark experiments on real data (mBERT, XLM-R)


@pytest.fixture(autouse=True)
def clean_gin():
  gin.clear_config(clear_constants=True)
  yield
  gin.clear_config(clear_constants=True)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_experiment_parses(experiment):
  real = experiment.startswith(tuple(f"experiments/{b}_{m}" for b in ("xtreme", "xglue") for m in ("mbert", "xlmr")))
  main.parse_gin([experiment], REQUIRED.get(experiment, REAL_DATA if real else []))
  assert gin.query_parameter("%RUN_DIR")


@pytest.mark.parametrize("objective,heads,decoder", [("xdae", 8, 6), ("xfnp", 16, 12)])
def test_unicoder_pretraining_and_fine_tuning_share_the_model(objective, heads, decoder):
  """The generation fine-tuning experiment builds the model its pretraining experiment trained."""
  from xtreme_jax.networks import config
  built = []
  for experiment, extra in ((f"experiments/{objective}_pretrain.gin", []),
                            (f"experiments/xglue_unicoder_{objective}_generation.gin", ["DATA_DIR='d'"])):
    gin.clear_config(clear_constants=True)
    main.parse_gin([experiment], ["VOCAB='v'", "RUN_DIR='r'", "INIT_CHECKPOINT='c'", *extra])
    built.append((gin.get_configurable(config.TransformerConfig)(), gin.query_parameter("%DECODER_LAYERS")))
  assert built[0] == built[1] and built[0][0].num_heads == heads and built[0][1] == decoder


def test_filter_recipes_set_the_released_depths_and_the_grid_point():
  from xtreme_jax.runs import xtreme
  main.parse_gin(["experiments/xtreme_filter_xlmr_large.gin"], ["DATA_DIR='d'", "RUN_DIR='r'"])
  tasks = gin.get_configurable(xtreme.FinetuneSettings)().tasks
  assert {k: (t.filter.local_layers, t.filter.fusion_layers, t.batch_size) for k, t in tasks.items()
          if k in ("xnli", "udpos", "squad", "tydiqa")} == {"xnli": (1, 1, 64), "udpos": (1, 1, 64),
                                                            "squad": (1, 20, 64), "tydiqa": (1, 20, 64)}
  gin.clear_config(clear_constants=True)
  main.parse_gin(["experiments/xtreme_filter_grid.gin"], ["DATA_DIR='d'", "RUN_DIR='r'", "FILTER_DEPTHS=(10, 1)"])
  settings = gin.get_configurable(xtreme.FinetuneSettings)()
  assert settings.setting == "filter_teacher"
  assert {(t.filter.local_layers, t.filter.fusion_layers) for t in settings.tasks.values()
          if isinstance(t, xtreme.TaskSettings)} == {(10, 1)}


@pytest.mark.parametrize("experiment,tasks", [("experiments/xtreme_mbert.gin", ("xnli", "udpos", "squad", "tydiqa")),
                                              ("experiments/xglue_mbert.gin", ("NER", "POS", "NC", "MLQA"))])
def test_freeze_bottom_reaches_every_fine_tuned_task(experiment, tasks):
  from xtreme_jax.runs import xtreme
  from xtreme_jax.training.optim import freeze_bottom
  main.parse_gin([experiment], ["DATA_DIR='d'", "RUN_DIR='r'"])
  settings = gin.get_configurable(xtreme.FinetuneSettings)()
  assert {settings.recipe(t).optimizer.freeze for t in tasks} == {None}  # default: fine-tune everything
  gin.clear_config(clear_constants=True)
  main.parse_gin([experiment], ["DATA_DIR='d'", "RUN_DIR='r'", "FREEZE_BOTTOM=3"])
  settings = gin.get_configurable(xtreme.FinetuneSettings)()
  assert {settings.recipe(t).optimizer.freeze for t in tasks} == {freeze_bottom(3)}


@pytest.mark.parametrize("experiment,task", [("experiments/mbert_paper_feature_based.gin", "parsing"),
                                             ("experiments/mbert_paper_xnli_feature_based.gin", "xnli")])
def test_feature_based_experiments_set_the_papers_recipe(experiment, task):
  """Both benchmarks' feature-based runs: the encoder frozen, Adam 1e-3 held constant but for the halvings on
  English dev plateaus (stop below 1e-5), batch 32, an evaluation per epoch."""
  from xtreme_jax.runs import xtreme
  from xtreme_jax.training.trainer import PlateauSchedule
  main.parse_gin([experiment], ["DATA_DIR='d'", "RUN_DIR='r'"])
  settings = gin.get_configurable(xtreme.FinetuneSettings)()
  recipe = settings.recipe(task)
  assert settings.setting == "feature_based" and recipe.optimizer.freeze == "(^|/)backbone/"
  assert (recipe.optimizer.learning_rate, recipe.optimizer.schedule, recipe.optimizer.weight_decay) == (
      1e-3, "constant", 0.0)
  assert recipe.optimizer.warmup_steps == 0 and recipe.plateau == PlateauSchedule(0.5, 1, 1e-5)
  assert (recipe.batch_size, recipe.eval_every, recipe.epochs, recipe.selection) == (32, "epoch", 30.0, "english_dev")


def test_the_papers_xnli_recipe_replaces_xtremes():
  from xtreme_jax.runs import xtreme
  main.parse_gin(["experiments/mbert_paper_xnli.gin"], ["DATA_DIR='d'", "RUN_DIR='r'", "BATCH_SIZE=16"])
  settings = gin.get_configurable(xtreme.FinetuneSettings)()
  recipe = settings.recipe("xnli")
  assert settings.setting == "zero_shot" and (recipe.batch_size, recipe.epochs, recipe.eval_every) == (16, 3.0, "epoch")
  o = recipe.optimizer
  assert (o.learning_rate, o.warmup_ratio, o.warmup_steps, o.weight_decay, o.schedule) == (2e-5, 0.1, None, 0.01,
                                                                                           "linear")


@pytest.mark.parametrize("experiment,tasks", [("experiments/mbert_paper_grid.gin", ("mldoc", "ner", "parsing")),
                                              ("experiments/mbert_paper_xnli_grid.gin", ("xnli",))])
def test_one_grid_point_sets_learning_rate_batch_and_epochs(experiment, tasks):
  """The paper's 3 x 2 x 2 grid is one sweep of GRID_POINT (runs/grid_point.gin)."""
  from xtreme_jax.runs import xtreme
  main.parse_gin([experiment], ["DATA_DIR='d'", "RUN_DIR='r'", "GRID_POINT=(5e-5, 16, 4.0)"])
  settings = gin.get_configurable(xtreme.FinetuneSettings)()
  assert {(settings.recipe(t).optimizer.learning_rate, settings.recipe(t).batch_size, settings.recipe(t).epochs)
          for t in tasks} == {(5e-5, 16, 4.0)}
  gin.clear_config(clear_constants=True)
  main.parse_gin([experiment], ["DATA_DIR='d'", "RUN_DIR='r'", "GRID_POINT=(5e-5, 16)"])
  with pytest.raises(errors.ConfigError, match=r"grid point \(5e-05, 16\); expected a tuple \(learning rate, "
                                               r"batch size, epochs\)"):
    gin.get_configurable(xtreme.FinetuneSettings)()


def test_a_missing_required_macro_fails_while_parsing():
  with pytest.raises(errors.ConfigError, match="macro DATA_DIR is required and not set"):
    main.parse_gin(["experiments/xtreme_mbert.gin"], ["RUN_DIR='r'"])


def test_the_readmes_sample_runs_are_the_samples_checked_to_learn():
  """The README's sample-run table lists exactly the runs tests/test_sample_runs.py runs (`-m samples`)."""
  readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md"), encoding="utf-8").read()
  table = readme.split("## Sample runs", 1)[1].split("\n## ", 1)[0]
  listed = re.findall(r"^\| `xtreme-jax run --gin_file=experiments/([\w.]+)` \|", table, re.M)
  assert sorted(listed) == sorted(sample_runs.SAMPLES)
