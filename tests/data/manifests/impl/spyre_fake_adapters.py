"""Adapter implementations used by the manifests under tests/data/manifests (test data)."""

from __future__ import annotations

from torch import nn

from spyre_adapters.contract import ModelEdit


class Tagged(nn.Module):
    """Wraps a module; marks that an adapter swapped it."""

    def __init__(self, inner: nn.Module, tag: str) -> None:
        super().__init__()
        self.inner = inner
        self.tag = tag

    def forward(self, x):  # type: ignore[no-untyped-def]
        return self.inner(x)


class WrapType:
    """Wraps every submodule of one type in :class:`Tagged`."""

    def __init__(self, kind: type[nn.Module], tag: str) -> None:
        self.kind = kind
        self.tag = tag

    def matches(self, model: nn.Module) -> bool:
        return any(isinstance(m, self.kind) for m in model.modules())

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        paths = [p for p, m in model.named_modules() if isinstance(m, self.kind) and p]
        for path in paths:
            edit.replace_module(path, Tagged(model.get_submodule(path), self.tag))


class SetTag:
    """Sets ``spyre_tag`` on every Linear."""

    def __init__(self, value: str) -> None:
        self.value = value

    def matches(self, model: nn.Module) -> bool:
        return any(isinstance(m, nn.Linear) for m in model.modules())

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        for module in model.modules():
            if isinstance(module, nn.Linear):
                edit.set_attr(module, "spyre_tag", self.value)


class FailsHalfway:
    """Edits one Linear, then raises: the edit must be rolled back."""

    def matches(self, model: nn.Module) -> bool:
        return True

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        for module in model.modules():
            if isinstance(module, nn.Linear):
                edit.set_attr(module, "spyre_tag", "half-done")
                break
        raise RuntimeError("weights have an unexpected shape (64, 65)")


class NeverMatches:
    def matches(self, model: nn.Module) -> bool:
        return False

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        raise AssertionError("apply() called although matches() said no")


class MatchRaises:
    def matches(self, model: nn.Module) -> bool:
        raise KeyError("config has no model_type")

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        raise AssertionError("unreachable")


class Stamps:
    """Adds its stamp to ``spyre_stamps`` of the model; several apply together with one call
    (counted in ``together_calls``), unless one of them is ``broken`` (its ``apply`` raises,
    and so does ``apply_together`` of a run holding it)."""

    together_calls: list[int] = []

    def __init__(self, stamp: str, *, broken: bool = False) -> None:
        self.stamp = stamp
        self.broken = broken

    def matches(self, model: nn.Module) -> bool:
        return True

    def apply(self, model: nn.Module, edit: ModelEdit) -> None:
        if self.broken:
            raise RuntimeError(f"stamp {self.stamp} is broken")
        stamps = model.__dict__.get("spyre_stamps", ())
        edit.set_attr(model, "spyre_stamps", (*stamps, self.stamp))

    @staticmethod
    def apply_together(adapters: list[Stamps], model: nn.Module, edit: ModelEdit) -> None:
        Stamps.together_calls.append(len(adapters))
        if any(a.broken for a in adapters):
            edit.set_attr(model, "spyre_stamps", ("half-done",))
            raise RuntimeError("a broken stamp in the run")
        stamps = model.__dict__.get("spyre_stamps", ())
        edit.set_attr(model, "spyre_stamps", (*stamps, *(a.stamp for a in adapters)))


stamp_1 = Stamps("1")
stamp_2 = Stamps("2")
stamp_3 = Stamps("3")
stamp_broken = Stamps("x", broken=True)

relu = WrapType(nn.ReLU, "relu")
gelu = WrapType(nn.GELU, "gelu")
tag_a = SetTag("a")
tag_b = SetTag("b")
fails = FailsHalfway()
never = NeverMatches()
match_raises = MatchRaises()
not_an_adapter = object()


def _histc_bridge() -> object:
    from spyre_adapters.library.op_bridge import OpBridge

    return OpBridge({"aten.histc.default": "rewrite"})


histc_rewrite = _histc_bridge()
