"""The GPU node: a one-node cluster on a real GPU machine (benchmarks/gpu/node/README.md)."""
