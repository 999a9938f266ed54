"""Built-in adapter implementations, one concept per module."""
