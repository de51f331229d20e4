"""seqio Task / Mixture registrations (imported as `xtreme_tasks`).

Each module registers its tasks when imported (nothing is imported here, so a user pays only for what they use):
`import xtreme_tasks.xtreme` every XTREME task, language and setting; `xtreme_tasks.xglue` every XGLUE task
(understanding and generation), language and setting; `xtreme_tasks.translation` WMT14 En->De / En->Fr;
`xtreme_tasks.pretraining` the pretraining corpora (see each module).
"""
