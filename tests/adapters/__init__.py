"""Tests of spyre_adapters: manifests, registry, lifecycle, locks, prepare and the CLI."""
