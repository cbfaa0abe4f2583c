"""The probe's fixtures: fake driver libraries and modules (harness.py)."""

from .harness import fakes, no_driver

__all__ = ["fakes", "no_driver"]
