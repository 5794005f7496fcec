"""Framework integrations: `venturi.contrib.flask` and `venturi.contrib.django`."""
