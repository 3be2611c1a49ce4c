"""spanwatch analyzer: what the network added to each training step (grows in later issues)."""
