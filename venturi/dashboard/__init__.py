"""The venturi dashboard: a server-rendered WSGI application to watch and steer a queue
in a browser. Needs Jinja2 (``pip install "venturi[dashboard]"``).

```python
from venturi.dashboard import Dashboard
app = Dashboard(queue, password="...", allowed_hosts=["ops.example.com"])
```

`venturi dashboard` serves it (`venturi.dashboard.server`); Flask:
`venturi.contrib.flask.mount_dashboard`; Django: ``venturi.contrib.django.urls``.
"""

from venturi.dashboard.app import Dashboard
from venturi.dashboard.security import LoginThrottle

__all__ = ["Dashboard", "LoginThrottle"]
