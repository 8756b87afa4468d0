"""Each topic's row rules: how a claim's standard frame becomes rows of the paper table."""
