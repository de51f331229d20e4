"""The bundled Gin configs, shipped as package data `xtreme_jax.gin_configs` (see pyproject.toml)."""
