"""Unit tests of the operator's runtime: API client, informers, drift watch, Events, metrics."""
