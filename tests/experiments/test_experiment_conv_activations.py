"""conv-activations: what autograd saves in a conv net, counted by storage, against B x C x H x W;
ResNet-50's weights, gradients and Adam state from its tensors; torch.amp's layout."""

from __future__ import annotations

import pydantic
import pytest
import torch
import torchvision
from torch import nn

from tutor import experiments
from tutor.experiments.conv_activations import (
    REST,
    WEIGHT_COPY,
    korthikanti_bytes,
    lab_bytes,
    saved_storages,
    step_saved,
)
from tutor.experiments.events import Finished, Note, Started, Table

QUICK = experiments.get("conv-activations").quick


def run(values=None, device="cpu"):
    events = list(experiments.start("conv-activations", {**QUICK, **(values or {})}, device=device))
    assert isinstance(events[0], Started) and isinstance(events[-1], Finished)
    return events, events[-1].metrics


@pytest.fixture(scope="module")
def quick_run():
    return run()


def test_a_storage_saved_twice_or_through_a_view_counts_once():
    a = torch.randn(4, 4, requires_grad=True)  # 64 bytes
    with saved_storages(nn.Identity()) as saved:
        a.sin()  # saves a
        a.cos()  # saves a again
        a[:2].sin()  # saves a view of a
    assert (saved.total, saved.saves, saved.per_save, saved.views) == (64, 3, 3 * 64, 1)


def test_a_model_s_own_weights_are_left_out_and_autocast_s_copies_are_named():
    model = nn.Linear(8, 8, bias=False)
    x = torch.randn(2, 8, requires_grad=True)  # a leaf that wants a gradient, like a weight, but not the model's
    with saved_storages(model) as saved:
        model(x)  # saves x and the weight: the weight is the model's own
    assert saved.total == x.numel() * 4
    with saved_storages(model) as saved, torch.autocast("cpu", dtype=torch.bfloat16):
        model(x)  # saves the bfloat16 casts of x and of the weight
    assert saved.of(WEIGHT_COPY) == 8 * 8 * 2
    assert saved.of(REST) == x.numel() * 2  # the cast input is not a weight's copy


def test_a_conv_stack_keeps_one_tensor_a_layer_and_two_with_batchnorm(quick_run):
    events, m = quick_run
    assert set(experiments.get("conv-activations").metrics) <= set(m)
    # the formula's B x C x H x W per conv, plus the input images (3 channels of 64)
    assert 1.0 < m["stack_over_formula"] < 1.1
    assert 2.0 < m["bn_stack_over_formula"] < 2.1
    said = " ".join(e.text for e in events if isinstance(e, Note))
    assert "BatchNorm saves its input too" in said


def test_resnet50_s_static_memory_is_counted_from_its_tensors(quick_run):
    _, m = quick_run
    model = torchvision.models.resnet50(weights=None)
    count = sum(t.numel() for t in model.parameters())
    assert m["parameters"] == count == 25_557_032
    assert m["param_bytes"] == m["grad_bytes"] == 4 * count
    tensors = len(list(model.parameters()))
    # exp_avg and exp_avg_sq per parameter, and a float32 step counter per tensor
    assert m["adam_state_bytes"] == 8 * count + 4 * tensors
    # autocast casts every conv and Linear weight (not the biases, nor BatchNorm's): 2 bytes each
    assert m["weight_copy_bytes"] == 2 * sum(t.numel() for t in model.parameters() if t.dim() > 1)


def test_resnet50_saves_about_twice_the_formula_and_half_of_it_under_autocast(quick_run):
    events, m = quick_run
    assert 1.8 < m["saved_over_formula"] < 2.1
    assert m["saved_over_formula"] == pytest.approx(m["activation_bytes"] / m["formula_bytes"])
    assert m["per_save_bytes"] > m["activation_bytes"]  # the ReLU outputs are saved twice
    assert 1.8 < m["autocast_shrink"] < 2.1 and m["autocast_dtype"] == "bfloat16"
    # the worked example is the measurement scaled: 224 x 224 from the quick 64 x 64 by area
    assert m["target_activation_bytes"] == pytest.approx(32 * m["activation_bytes_per_image"], rel=0.01)
    assert m["activations_over_weights"] == pytest.approx(m["target_activation_bytes"] / m["param_bytes"])
    assert 15 < m["activations_over_weights"] < 50
    static = m["param_bytes"] + m["grad_bytes"] + m["adam_state_bytes"]
    assert m["fp32_total_bytes"] == pytest.approx(static + m["target_activation_bytes"])
    assert m["amp_total_bytes"] < m["fp32_total_bytes"]
    assert m["peak_step_bytes"] is None  # no CUDA
    said = " ".join(e.text for e in events if isinstance(e, Note))
    assert "scaled by area" in said and "No CUDA here" in said
    worked = next(e for e in events if isinstance(e, Table) and "training memory" in e.title)
    assert [r[0] for r in worked.rows][:4] == ["weights", "gradients", "Adam m + v", "bfloat16 weight copies"]


def test_the_transformer_formula_against_2blh():
    # GPT-2 small: 17 + 2.5 * a * s / h = 17 + 40
    assert korthikanti_bytes(1024, 768, 12) / lab_bytes(1024, 768) == pytest.approx(57)
    assert korthikanti_bytes(1024, 768, 12, batch=4) == 4 * korthikanti_bytes(1024, 768, 12)


def test_the_conv_output_row_is_the_formula():
    model = torchvision.models.resnet50(weights=None).train()
    x, y = torch.randn(1, 3, 64, 64), torch.tensor([3])
    saved, formula = step_saved(model, x, y, None)
    assert saved.of("conv") == formula  # every conv's output is BatchNorm's saved input
    assert saved.of(WEIGHT_COPY) == 0


def test_image_sizes_that_resnet_cannot_halve_are_refused():
    spec = experiments.get("conv-activations")
    for bad in ({"image_size": 100}, {"image_size": 32}, {"batch": 1}):
        with pytest.raises(pydantic.ValidationError):
            spec.make_params(bad)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_reads_the_step_s_peak():
    events, m = run(device="cuda")
    assert m["device"].startswith("cuda") and m["autocast_dtype"] == "float16"
    # at the end of the forward pass every saved tensor is alive (the input images came before the
    # baseline); by the end of backward every gradient is
    assert m["peak_step_bytes"] >= max(0.95 * m["activation_bytes"], m["grad_bytes"])
    assert any("max_memory_allocated during" in e.text for e in events if isinstance(e, Note))
