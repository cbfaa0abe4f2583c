"""Unit tests of the operator's pure decisions: reviews, decisions, placement, the node index."""
