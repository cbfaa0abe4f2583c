"""Unit tests of the repository: import layers, module sizes, docs against code, CI integrations."""
