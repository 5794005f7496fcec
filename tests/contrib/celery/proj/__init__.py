"""A Celery project laid out as Celery's examples lay it out: the app in ``celery.py``
configured from a settings module, shared tasks in an app package's ``tasks.py``."""
