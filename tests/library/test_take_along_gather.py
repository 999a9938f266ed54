"""``take-along-gather``: ``torch.take_along_dim`` as the ``gather`` it stands for.

CPU: :func:`take_along` equals ``torch.take_along_dim`` exactly (no dim, negative dims,
broadcast index and values, integer and float values). Device: PP-DocLayoutV2's sort of its
detections (an argsort's indices expanded over the box coordinates) stops at
``int64-storage`` without the adapter and matches the CPU with it; functions and methods are
both covered. Matching, declines, rollback, and nothing the model shows changes. 1.1.0 takes
the tensor by keyword too and runs ``generate`` inside the mode: a tiny Llama's beam search
(``GenerationMixin._gather_beams``) stops at ``int64-storage`` without it and gives the CPU's
sequences with it; on the CPU its beams are the stock ones, and rollback removes the bound
``generate``."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from library_models import (
    apply,
    assert_rollback_exact,
    causal_lm,
    decorated,
    device_runs,
    registry_without,
)
from torch import nn
from torch.overrides import TorchFunctionMode

import spyre_sim
from spyre_adapters.library.take_along_gather import TakeAlongGather, adapter, take_along
from spyre_adapters.library.take_along_gather_v1_1_0 import (
    TakeAlongKeywords,
    class_takes_along,
    generation_takes_along,
)
from spyre_adapters.library.take_along_gather_v1_1_0 import adapter as v11

pytestmark = pytest.mark.filterwarnings("ignore::spyre_sim.SpyreSimWarning")

CASES = [
    ((3, 30), (3, 30), 1),
    ((3, 30, 4), (3, 30, 1), 1),  # the index broadcast over the last dim
    ((3, 1, 4), (3, 7, 4), 1),  # values broadcast along another dim
    ((2, 5, 6), (2, 5, 3), -1),
    ((4, 5), (2, 5), 0),
    ((4, 5), (6,), None),  # no dim: the flattened tensors
]


@pytest.mark.parametrize(("values_shape", "index_shape", "dim"), CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_the_values_are_take_along_dim_exactly(
    values_shape: tuple[int, ...], index_shape: tuple[int, ...], dim: int | None, dtype: torch.dtype
) -> None:
    generator = torch.Generator().manual_seed(len(values_shape) + (dim or 7))
    values = (torch.randn(values_shape, generator=generator) * 100).to(dtype)
    size = values.numel() if dim is None else values.shape[dim]
    indices = torch.randint(0, size, index_shape, generator=generator)
    ref = torch.take_along_dim(values, indices, dim)
    out = take_along(values, indices, dim)
    assert out is not None
    assert out.shape == ref.shape
    assert torch.equal(out, ref)
    with TakeAlongGather():
        assert torch.equal(torch.take_along_dim(values, indices, dim), ref)
        assert torch.equal(values.take_along_dim(indices, dim=dim), ref)


def test_shapes_that_do_not_broadcast_are_left_to_the_stock_function() -> None:
    values, indices = torch.randn(3, 4), torch.zeros(2, 4, dtype=torch.int64)
    assert take_along(values, indices, 1) is None
    with TakeAlongGather(), pytest.raises(RuntimeError):
        torch.take_along_dim(values, indices, 1)


class SortDetections(nn.Module):
    """PP-DocLayoutV2's post-processing: detections kept first, by an argsort of a mask."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(64, 4)

    @decorated
    def forward(self, queries: torch.Tensor, scores: torch.Tensor) -> tuple[torch.Tensor, ...]:
        boxes = self.head(queries)
        class_ids = scores.argmax(-1)
        indices = torch.argsort((scores.amax(-1) > 0).int(), dim=1, descending=True)
        sorted_ids = torch.take_along_dim(class_ids, indices, dim=1)
        sorted_boxes = boxes.take_along_dim(indices[..., None].expand(-1, -1, 4), dim=1)
        return sorted_ids, sorted_boxes


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(3, 30, 64, generator=generator), torch.randn(3, 30, 5, generator=generator)


def _model() -> SortDetections:
    torch.manual_seed(0)
    return SortDetections().eval()


def test_the_device_stops_without_it_and_matches_the_cpu_with_it() -> None:
    queries, scores = _inputs()
    with torch.no_grad():
        ref_ids, ref_boxes = _model()(queries, scores)
    stopped, (ids, boxes) = device_runs(_model, (queries, scores), adapter.name, "2026.09")
    assert isinstance(stopped, spyre_sim.SpyreLoweringError)
    assert stopped.gap == "int64-storage"
    assert torch.equal(ids.cpu().long(), ref_ids)
    assert torch.allclose(boxes.cpu().float(), ref_boxes, atol=2e-2)


def test_modules_that_do_not_call_it_are_not_matched() -> None:
    assert not adapter.matches(nn.Sequential(nn.Linear(4, 4)))
    assert adapter.matches(_model())
    with pytest.raises(ValueError, match="take-along-gather does not apply to Sequential"):
        apply(adapter, nn.Sequential(nn.Linear(4, 4)))


def test_nothing_the_model_shows_changes_and_rollback_is_exact() -> None:
    stock, model = _model(), _model()
    edit = apply(adapter, model)
    assert len(edit) >= 1
    assert not adapter.matches(model), "an adapted model must not match again"
    assert model.state_dict().keys() == stock.state_dict().keys()
    with torch.no_grad():
        for got, want in zip(model(*_inputs()), stock(*_inputs()), strict=True):
            assert torch.equal(got, want)

    def probe(m: nn.Module) -> torch.Tensor:
        with torch.no_grad():
            return m(*_inputs())[1]  # type: ignore[no-any-return]

    assert_rollback_exact(adapter, _model(), probe)


# -- 1.1.0: keyword arguments, and beam search inside generate ---------------------------------


def test_1_1_0_takes_the_tensor_by_keyword_as_beam_search_passes_it() -> None:
    values = torch.randn(2, 4, 5)
    indices = torch.tensor([[[3], [0], [0], [2]], [[1], [1], [2], [0]]])
    ref = torch.take_along_dim(input=values, indices=indices, dim=1)
    calls: list[str] = []

    class Seen(TorchFunctionMode):
        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            calls.append(getattr(func, "__name__", ""))
            return func(*args, **(kwargs or {}))

    with Seen(), TakeAlongKeywords():
        out = torch.take_along_dim(input=values, indices=indices, dim=1)
    assert torch.equal(out, ref)
    assert "gather" in calls
    assert "take_along_dim" not in calls
    calls.clear()
    with Seen(), TakeAlongGather():  # 1.0.0 left the keyword call as it was
        torch.take_along_dim(input=values, indices=indices, dim=1)
    assert "gather" not in calls


def _llama() -> nn.Module:
    return causal_lm("llama")


def test_1_1_0_matches_a_model_whose_beam_search_takes_along() -> None:
    assert generation_takes_along(type(_llama()))
    assert not generation_takes_along(nn.Linear)
    assert v11.matches(_llama())
    # 1.0.0 found _gather_beams in LlamaForCausalLM's class and bound its forward, where
    # nothing calls take_along_dim, and left generate as it was; 1.1.0 binds generate only
    assert [type(m).__name__ for m, _ in adapter.targets(_llama())] == ["LlamaForCausalLM"]
    assert v11.targets(_llama()) == []
    assert not class_takes_along(type(_llama()))
    assert [type(m).__name__ for m, _ in v11.targets(_model())] == ["SortDetections"]

    class Helper(nn.Module):  # a function of the class, not the forward, calls it
        def pick(self, x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
            return torch.take_along_dim(x, i, dim=1)

    assert class_takes_along(Helper)
    assert v11.matches(_model())  # and what 1.0.0 matched
    assert not v11.matches(nn.Sequential(nn.Linear(4, 4)))
    with pytest.raises(ValueError, match="and no generate that does"):
        apply(v11, nn.Sequential(nn.Linear(4, 4)))


def _beams(model: nn.Module, device: str = "cpu") -> Any:
    prompt = torch.tensor([[5, 17, 3, 9], [8, 2, 31, 4]])
    with torch.no_grad():
        return model.generate(
            prompt.to(device),
            attention_mask=torch.ones_like(prompt).to(device),
            num_beams=3,
            max_new_tokens=4,
            do_sample=False,
            return_dict_in_generate=True,
            output_scores=True,
        )


def test_1_1_0_beam_search_is_the_stock_one_and_rollback_restores_generate() -> None:
    stock, model = _llama(), _llama()
    edit = apply(v11, model)
    assert "generate" in model.__dict__
    assert not v11.matches(model), "an adapted model must not match again"
    assert model.state_dict().keys() == stock.state_dict().keys()
    want, got = _beams(stock), _beams(model)
    assert torch.equal(got.sequences, want.sequences)
    assert torch.equal(got.sequences_scores, want.sequences_scores)
    edit.rollback()
    assert "generate" not in model.__dict__
    assert torch.equal(_beams(model).sequences, want.sequences)


def test_1_1_0_beam_search_stops_without_it_and_matches_the_cpu_with_it() -> None:
    import spyre_adapters

    want = _beams(_llama())
    with spyre_sim.use_stack("2026.09"):
        plain = _llama()
        spyre_adapters.prepare(plain, "2026.09", registry=registry_without(adapter.name))
        with pytest.raises(spyre_sim.SpyreLoweringError) as stopped:
            _beams(plain.to("spyre"), "spyre")
        assert stopped.value.gap == "int64-storage"
        model = _llama()
        spyre_adapters.prepare(model, "2026.09")
        assert ("take-along-gather", "1.1.0") in {
            (a.name, str(a.version)) for a in spyre_adapters.applied(model)
        }
        got = _beams(model.to("spyre"), "spyre")
    assert torch.equal(got.sequences.cpu().long(), want.sequences)
    assert torch.allclose(got.sequences_scores.cpu().float(), want.sequences_scores, atol=2e-2)
