"""Enablement: getting a model family running, on top of the lifecycle core.

The core of :mod:`spyre_adapters` (contract, manifest, registry, lifecycle, lock, waivers,
audit, preparation) manages adapters that exist. This subpackage finds out what a family
needs and proves what adapters do:

- :mod:`.size_presets` holds the size presets, :mod:`.family_configs` shrinks a model type's
  config to one, :mod:`.families`
  builds the model from it; :mod:`.testers` takes
  configs and inputs from a Transformers test tree instead;
- :mod:`.triage` runs one family on the device stock and adapted and judges it against the CPU;
- :mod:`.sweep` classifies every (model type, release) pair, each family in an isolated worker
  (:mod:`._isolation`), and renders :mod:`._sweep_html`;
- :mod:`.verify` proves a retirement by running the families without the adapter;
- :mod:`.bridge`, :mod:`.op_validation` and :mod:`.generation` are the bridge loop and the
  generated adapters it writes; :mod:`.skeletons` the hand-written adapter skeletons;
- :mod:`.differential` is the differential testing of every adapter against the CPU.
"""
