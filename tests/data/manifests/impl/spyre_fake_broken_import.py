"""A module that fails at import (test data for entry-point validation)."""

raise ImportError("needs a package that is not installed: flash_attn")
