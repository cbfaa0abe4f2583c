"""Hypothesis profiles for the unit tests, chosen by ``HYPOTHESIS_PROFILE``.

- ``ci``, the default (``make unit``, ``make test``): 200 examples per property, so that the
  property tests are a small part of the unit run and a change gets its answer in minutes.
- ``dev``: 50 per property, for a quick loop while editing.
- ``nightly`` (``make nightly``): 100,000 per property, where the rare inputs get found.

Tests whose examples cost more scale their own count from the profile's
(``settings.default.max_examples``), so a profile moves them all. Examples stay random: each run
explores new inputs, and hypothesis' database replays any failure it found.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILES = {"ci": 200, "dev": 50, "nightly": 100_000}

for _name, _examples in PROFILES.items():
    settings.register_profile(
        _name, max_examples=_examples, deadline=None, suppress_health_check=list(HealthCheck)
    )
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
