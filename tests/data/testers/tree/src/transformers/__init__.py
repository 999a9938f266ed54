"""Stands for the library sources some test trees read at import (a test tree ships src/transformers)."""
