"""Adapters that apply wherever they find targets in a model.

Most library adapters scan the model for the places they change (modules, forwards, methods)
and change each of them. Such an adapter matches a model when the scan finds at least one
target, and refuses to apply, with a ``ValueError`` naming the adapter, the model class and
what it looked for, when the scan finds none. :class:`TargetedAdapter` is that contract;
subclasses say how to scan (``targets``) and how to change one model (``edit_targets``).
"""

from __future__ import annotations

from typing import ClassVar, Generic, TypeVar

from torch import nn

from spyre_adapters.contract import ModelEdit

__all__ = ["TargetedAdapter"]

T = TypeVar("T")


class TargetedAdapter(Generic[T]):
    """An adapter that matches where ``targets`` finds something and edits what it finds.

    ``name`` is the adapter's manifest name and ``missing`` what it looked for, as the
    no-target error says it: ``"<name> does not apply to <Model>: <missing>"``.
    """

    name: ClassVar[str]
    missing: ClassVar[str]

    def targets(self, model: nn.Module) -> list[T]:
        """The places of ``model`` this adapter changes; must not change the model."""
        raise NotImplementedError

    def edit_targets(self, model: nn.Module, edit: ModelEdit, targets: list[T]) -> None:
        """Change every target (a non-empty list) through ``edit``."""
        raise NotImplementedError

    def matches(self, model: nn.Module) -> bool:
        return bool(self.targets(model))

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        targets = self.targets(model)
        if not targets:
            raise ValueError(
                f"{self.name} does not apply to {type(model).__name__}: {self.missing}"
            )
        self.edit_targets(model, edit, targets)
