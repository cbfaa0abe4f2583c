"""The probe's fixtures: fake driver libraries and modules (harness.py)."""

from .harness import fakes

__all__ = ["fakes"]
