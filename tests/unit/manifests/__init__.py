"""Unit tests of reading files as kubectl does, rewriting them for fix, the report formats."""
