"""The NVIDIA container runtime's environment variable that hides a node's GPUs.

A pure constant module: ``NVIDIA_VISIBLE_DEVICES=void`` makes the NVIDIA runtime expose no GPU
to the container (NVIDIA Container Toolkit, "Specialized configurations": ``void`` or ``none``).
"""

from __future__ import annotations

__all__ = ["NO_GPU", "VISIBLE_DEVICES"]

VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
NO_GPU = "void"
