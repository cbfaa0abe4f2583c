"""Unit tests of the command line: flags, exit codes, golden output, hostile input."""
