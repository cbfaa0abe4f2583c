"""Unit tests of the init container's GPU probe, against fake CUDA libraries."""
