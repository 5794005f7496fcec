"""The venturi dashboard: a server-rendered WSGI application to watch and steer a queue
in a browser. Needs Jinja2 (``pip install "venturi[dashboard]"``).

```python
from venturi.dashboard import Dashboard
app = Dashboard(queue, read_only=False)          # any WSGI server; `venturi dashboard`
```

Flask: `venturi.contrib.flask.mount_dashboard`; Django: ``venturi.contrib.django.urls``.
"""

from venturi.dashboard.app import Dashboard

__all__ = ["Dashboard"]
