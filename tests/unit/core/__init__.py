"""Unit tests of the pure core: engine, rules, inventory, policy, verifier; real-world verdicts."""
