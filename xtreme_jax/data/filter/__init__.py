"""FILTER's data: a task's examples paired with their translations, and the translation task files that make them."""
