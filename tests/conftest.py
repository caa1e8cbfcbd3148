"""Shared test settings: hypothesis profiles sized for 2-core CI machines."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")
