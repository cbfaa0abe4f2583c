"""Hypothesis profiles for the unit tests: ``HYPOTHESIS_PROFILE`` = ci (default) | nightly | dev.

ci runs 10,000 examples per property (`make unit`), nightly 100,000 (`make nightly`), dev 500.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.register_profile(
    "nightly", max_examples=100_000, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.register_profile(
    "dev", max_examples=500, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
