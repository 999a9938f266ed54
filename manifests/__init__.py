"""Built-in adapter manifests (TOML), installed as ``spyre_adapters.manifests``."""
