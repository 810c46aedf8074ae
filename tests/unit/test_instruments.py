"""Instruments: the formulas reproduce the course's reference figures, controls parse and step
as documented, a learner's own measurements feed them, and a Reading renders in 80 columns."""

from __future__ import annotations

import io
import itertools

import pytest
from rich.cells import cell_len
from rich.console import Console

from tutor.instruments import REGISTRY, Context, Control, SettingsError, render
from tutor.instruments import memory_ledger as ml
from tutor.instruments import pipeline as pl
from tutor.instruments.instrument import GB, GIB, gb, gb_gib

LEDGER = REGISTRY["memory-ledger"]
PIPELINE = REGISTRY["pipeline"]
XL = ml.PRESETS["gpt2-xl"]
TRANSFORMERS = sorted(name for name, p in ml.PRESETS.items() if p.layers)  # the presets with activations


def mem(**given):
    return LEDGER.compute(given)


def pipe(**given):
    return PIPELINE.compute(given)


def compute_seconds(outputs: dict) -> float:
    return outputs["compute_share"] * outputs["iteration_seconds"]


def data_seconds(outputs: dict) -> float:
    return outputs["data_share"] * outputs["iteration_seconds"]


def test_registry_holds_both_instruments():
    assert set(REGISTRY) == {"memory-ledger", "pipeline"}
    for name, inst in REGISTRY.items():
        assert inst.name == name and inst.title and inst.summary and inst.controls and inst.outputs
        # every output an instrument documents is one it computes, and nothing else
        assert set(inst.compute({}).outputs) == set(inst.outputs)


# ---------------------------------------------------------------- memory ledger: static memory


def test_gpt2_xl_fp32_adam_reference_figures():
    r = mem(model="gpt2-xl", precision="fp32", optimizer="adam")
    o = r.outputs
    assert o["parameters"] == 1_500_000_000
    assert o["weights_bytes"] == 6e9
    assert o["gradients_bytes"] == 6e9
    assert o["weight_copies_bytes"] == 0
    assert o["optimizer_bytes"] == 12e9
    assert o["static_bytes"] == 24e9
    assert o["static_gb"] == pytest.approx(24.0)
    assert o["bytes_per_param"] == 16
    assert o["adam_extra_bytes"] == 12e9 and o["adam_extra_gb"] == pytest.approx(12.0)
    assert "6 GB of weights, 6 GB of gradients and 12 GB of Adam" in " ".join(r.reference)


def test_sgd_pure_fp16_static_floor_is_6_gb():
    o = mem(optimizer="sgd", precision="fp16").outputs
    assert o["static_bytes"] == 6e9 and o["static_gb"] == pytest.approx(6.0)
    assert o["bytes_per_param"] == 4
    assert o["optimizer_bytes"] == 0 and o["weight_copies_bytes"] == 0


def test_mixed_precision_is_torch_amps_layout_and_saves_only_activations():
    """torch.amp keeps FP32 weights, gradients and Adam state, and autocast's 16-bit copies of
    the weights live from forward to backward (tests/experiments/test_amp_layout.py measures it)."""
    fp32 = mem(optimizer="adam", precision="fp32", batch=4).outputs
    mixed = mem(optimizer="adam", precision="mixed", batch=4).outputs
    assert mixed["bytes_per_param"] == 18
    assert mixed["weights_bytes"] == fp32["weights_bytes"] == 6e9
    assert mixed["gradients_bytes"] == 6e9 and mixed["optimizer_bytes"] == 12e9
    assert mixed["weight_copies_bytes"] == 3e9
    assert mixed["static_bytes"] == 27e9 > fp32["static_bytes"]
    assert mixed["activations_bytes"] < fp32["activations_bytes"]
    assert mixed["total_bytes"] < fp32["total_bytes"]


@pytest.mark.parametrize(
    "optimizer, precision, per_param",
    [
        ("sgd", "fp32", 8),
        ("momentum", "fp32", 12),
        ("adam", "fp32", 16),
        ("sgd", "fp16", 4),
        ("momentum", "fp16", 6),
        ("adam", "fp16", 8),
        ("sgd", "mixed", 10),
        ("momentum", "mixed", 14),
        ("adam", "mixed", 18),
    ],
)
def test_bytes_per_parameter_table(optimizer, precision, per_param):
    o = mem(optimizer=optimizer, precision=precision).outputs
    assert o["bytes_per_param"] == per_param
    assert o["static_bytes"] == per_param * XL.params


def test_adam_extra_is_what_adam_adds_over_sgd():
    for precision in ("fp32", "fp16", "mixed"):
        sgd = mem(optimizer="sgd", precision=precision).outputs
        adam = mem(optimizer="adam", precision=precision).outputs
        assert adam["static_bytes"] - sgd["static_bytes"] == sgd["adam_extra_bytes"] == adam["adam_extra_bytes"]


# ---------------------------------------------------------------- memory ledger: activations


def korthikanti_16bit(s: int, h: int, a: int) -> float:
    return s * h * (34 + 5 * a * s / h)


def korthikanti_fp32(s: int, h: int, a: int) -> float:
    # 16-bit tensors (34 - 2 mask bytes = 32 = 2 x 16) double; the masks stay one byte each
    return s * h * (66 + 9 * a * s / h)


def test_gpt2_xl_shape():
    assert (XL.seq, XL.hidden, XL.heads, XL.layers) == (1024, 1600, 25, 48)


@pytest.mark.parametrize("precision", ["fp16", "mixed"])
def test_layer_activations_match_korthikanti_in_16_bit(precision):
    assert ml.layer_activation_bytes(XL, precision) == pytest.approx(korthikanti_16bit(1024, 1600, 25), rel=1e-12)


def test_layer_activations_match_korthikanti_in_fp32():
    assert ml.layer_activation_bytes(XL, "fp32") == pytest.approx(korthikanti_fp32(1024, 1600, 25), rel=1e-12)


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_every_preset_follows_the_formula(name):
    p = ml.PRESETS[name]
    assert ml.layer_activation_bytes(p, "fp16") == pytest.approx(korthikanti_16bit(p.seq, p.hidden, p.heads))
    assert ml.layer_activation_bytes(p, "fp32") == pytest.approx(korthikanti_fp32(p.seq, p.hidden, p.heads))


def test_activations_scale_with_layers_and_batch():
    one = mem(precision="fp16", batch=1).outputs["activations_bytes"]
    # the layers (Korthikanti et al.), plus the output layer: logits and the loss's log-softmax
    assert one == pytest.approx(48 * korthikanti_16bit(1024, 1600, 25) + 1024 * 50_257 * (2 + 2))
    assert mem(precision="fp16", batch=4).outputs["activations_bytes"] == pytest.approx(4 * one)


def test_fp32_batch_4_total_is_the_chapters_89_gb_plus_the_output_layer_it_leaves_out():
    o = mem(model="gpt2-xl", optimizer="adam", precision="fp32", batch=4, checkpointing=False).outputs
    output = 4 * ml.output_bytes(XL, "fp32")  # 4 x 1024 x 50,257 x (4 B logits + 4 B log-softmax)
    assert output == pytest.approx(1.647e9, rel=1e-3)
    assert o["total_bytes"] - output == pytest.approx(89e9, rel=0.02)
    assert o["total_gb"] == pytest.approx(o["total_bytes"] / 1e9)
    assert o["total_bytes"] == o["static_bytes"] + o["activations_bytes"]


def test_checkpointing_cuts_activations_more_than_4x():
    for precision in ("fp32", "mixed"):
        full = mem(precision=precision, batch=4, checkpointing=False).outputs["activations_bytes"]
        ckpt = mem(precision=precision, batch=4, checkpointing=True).outputs["activations_bytes"]
        assert full / ckpt > 4
        # it keeps each layer's input plus one layer's activations
        expected = 4 * (
            XL.layers * XL.seq * XL.hidden * ml.ELEMENT_BYTES[precision]
            + ml.layer_activation_bytes(XL, precision)
            + ml.output_bytes(XL, precision)
        )
        assert ckpt == pytest.approx(expected)


def test_checkpointing_costs_exactly_a_third_more_compute():
    for precision, batch in itertools.product(("fp32", "mixed"), (1, 4, 64)):
        plain = pipe(precision=precision, batch=batch, checkpointing=False).outputs
        ckpt = pipe(precision=precision, batch=batch, checkpointing=True).outputs
        assert compute_seconds(ckpt) / compute_seconds(plain) == pytest.approx(4 / 3)
        assert ckpt["memory_bytes"] < plain["memory_bytes"]


# ---------------------------------------------------------------- memory ledger: budgets, verdicts


def test_budgets_are_powers_of_two():
    assert ml.BUDGETS["laptop"][1] == 8 * 2**30
    assert ml.BUDGETS["h100"][1] == 80 * 2**30 == 80 * GIB
    assert mem(budget="laptop").outputs["budget_bytes"] == 8 * 2**30
    assert mem(budget="h100").outputs["budget_gb"] == pytest.approx(80 * 2**30 / 1e9)


def test_adam_fp32_on_the_laptop_breaks_at_the_static_floor():
    r = mem(optimizer="adam", precision="fp32", budget="laptop", batch=1, checkpointing=True)
    assert r.outputs["breaks"] == "static floor" and r.outputs["fits"] is False
    assert r.level == "error"
    assert "static floor is 24.0 GB" in r.verdict
    assert "16 B per parameter" in r.verdict
    assert "8.59 GB" in r.verdict and "8.0 GiB" in r.verdict


def test_adam_fp32_batch_4_on_h100_breaks_in_the_activations():
    r = mem(optimizer="adam", precision="fp32", batch=4, budget="h100")
    assert r.outputs["breaks"] == "activations" and r.outputs["fits"] is False
    assert r.level == "error"
    assert "activations need 67.7 GB" in r.verdict
    # the same on checkpointing fits
    assert mem(optimizer="adam", precision="fp32", batch=4, budget="h100", checkpointing=True).outputs["fits"]


def test_sgd_fp16_batch_1_checkpointed_fits_the_laptop():
    r = mem(optimizer="sgd", precision="fp16", batch=1, checkpointing=True, budget="laptop")
    assert r.outputs["breaks"] == "none" and r.outputs["fits"] is True
    assert r.level == "ok" and r.verdict.startswith("Fits:")
    assert r.outputs["total_bytes"] <= 8 * 2**30


def test_pure_fp16_notes_the_missing_master_copy_and_mixed_says_its_layout():
    notes = " ".join(mem(precision="fp16").notes)
    assert "no FP32 master copy" in notes
    assert not any("master copy" in n for n in mem(precision="fp32").notes)
    mixed = " ".join(mem(precision="mixed").notes)
    assert "torch.amp" in mixed and "stay FP32" in mixed and "2 + 2 + 4 + 8 = 16 B" in mixed


def test_a_tight_fit_is_noted():
    # 6.34 GB of an 8 GiB (8.59 GB) laptop is 74%: no note
    roomy = mem(optimizer="sgd", precision="fp16", batch=1, checkpointing=True, budget="laptop")
    assert not any(n.startswith("Tight") for n in roomy.notes)
    ctx = Context(device_name="Small GPU", device_memory=int(roomy.outputs["total_bytes"] / 0.9))
    tight = LEDGER.compute(
        {"optimizer": "sgd", "precision": "fp16", "batch": 1, "checkpointing": True, "budget": "this"}, ctx
    )
    assert tight.outputs["fits"] is True
    assert any(n.startswith("Tight") and "CUDA context" in n for n in tight.notes)


def test_this_machine_budget_comes_from_the_context():
    unknown = LEDGER.compute({"budget": "this"})
    assert unknown.outputs["breaks"] == "unknown" and unknown.outputs["budget_bytes"] is None
    assert unknown.outputs["fits"] is None and unknown.level == "warning"
    ctx = Context(device_name="Test GPU", device_memory=40 * GIB)
    r = LEDGER.compute({"budget": "this", "optimizer": "sgd", "batch": 1}, ctx)
    assert r.outputs["budget_bytes"] == 40 * GIB
    assert r.chart.limit == 40 * GIB and "Test GPU" in r.chart.limit_label


def test_gb_and_gib_are_labelled():
    assert gb(6e9) == "6.00 GB"
    assert gb(24e9) == "24.0 GB"
    assert gb(90.06e9) == "90.1 GB"
    assert gb(0) == "0 GB"
    both = gb_gib(8 * 2**30)
    assert "8.59 GB" in both and "8.0 GiB" in both
    both = gb_gib(80 * 2**30)
    assert "85.9 GB" in both and "80.0 GiB" in both
    assert GB == 10**9 and GIB == 2**30


def test_memory_chart_segments_add_up_to_the_total():
    r = mem(precision="mixed", optimizer="adam", batch=4)
    (bar,) = r.chart.bars
    assert [s.name for s in bar.segments] == [
        "weights",
        "gradients",
        "16-bit weight copies",
        "m exp_avg",
        "v exp_avg_sq",
        "activations",
    ]
    assert bar.total == pytest.approx(r.outputs["total_bytes"])
    assert r.chart.limit == 80 * GIB
    fp32 = mem(precision="fp32").chart.bars[0]
    assert "16-bit weight copies" not in [s.name for s in fp32.segments]


# ---------------------------------------------------------------- memory ledger: m and v, switching parts off


@pytest.mark.parametrize(
    "optimizer, precision, m, v",
    [
        ("adam", "fp32", 4, 4),  # exp_avg and exp_avg_sq, FP32 like the weights
        ("adam", "mixed", 4, 4),  # torch.amp keeps the state FP32
        ("adam", "fp16", 2, 2),
        ("momentum", "fp32", 4, 0),  # one momentum_buffer
        ("momentum", "fp16", 2, 0),
        ("sgd", "fp32", 0, 0),
    ],
)
def test_optimizer_state_is_m_and_v_each_the_size_of_the_weights(optimizer, precision, m, v):
    o = mem(model="gpt2-xl", optimizer=optimizer, precision=precision).outputs
    assert o["m_bytes"] == m * PSI and o["v_bytes"] == v * PSI
    assert o["optimizer_bytes"] == o["m_bytes"] + o["v_bytes"]
    assert o["static_bytes"] == pytest.approx(
        o["weights_bytes"] + o["gradients_bytes"] + o["weight_copies_bytes"] + o["m_bytes"] + o["v_bytes"]
    )


def test_adam_is_drawn_as_two_bars_m_and_v_and_momentum_as_one():
    r = mem(model="gpt2-xl", optimizer="adam", precision="fp32")
    parts = {s.name: s.value for s in r.chart.bars[0].segments}
    assert parts["m exp_avg"] == parts["v exp_avg_sq"] == 6e9  # 1.5e9 x 4 B each: the chapter's 12 GB, split
    momentum = [s.name for s in mem(optimizer="momentum").chart.bars[0].segments]
    assert momentum == ["weights", "gradients", "m momentum_buffer", "activations"]
    assert [s.name for s in mem(optimizer="sgd").chart.bars[0].segments] == ["weights", "gradients", "activations"]
    assert "  m exp_avg = N x 4 B = 6.00 GB;  v exp_avg_sq = N x 4 B = 6.00 GB" in r.math
    z1 = mem(optimizer="adam", parallel="zero1", gpus=8).outputs  # sharded like the rest of the state
    assert z1["m_bytes"] == z1["v_bytes"] == 6e9 / 8
    assert (
        "  m exp_avg = N x 4 B / 8 = 750 MB;  v exp_avg_sq = N x 4 B / 8 = 750 MB"
        in mem(optimizer="adam", parallel="zero1", gpus=8).math
    )


@pytest.mark.parametrize("part", [p for p in ml.PARTS if p != "none"])
def test_switching_a_part_off_takes_exactly_its_bytes_off_the_bar(part):
    """Mixed precision with ZeRO-3 over 8 GPUs has every part; switching one off leaves the bar
    (and counted_bytes) that many bytes shorter, and the verdict, the total and fits as they were."""
    given = dict(model="gpt2-xl", optimizer="adam", precision="mixed", parallel="zero3", gpus=8, batch=4)
    full, off = mem(**given), mem(**given, switch_off=part)
    key = {"copies": "weight_copies_bytes", "m": "m_bytes", "v": "v_bytes", "gathered": "gathered_bytes"}.get(
        part, f"{part}_bytes"
    )
    size = full.outputs[key]
    assert size > 0
    assert off.outputs["switched_off_bytes"] == size
    assert off.outputs["counted_bytes"] == pytest.approx(full.outputs["total_bytes"] - size)
    assert off.outputs["counted_gb"] == pytest.approx(off.outputs["counted_bytes"] / 1e9)
    (bar,) = off.chart.bars
    assert bar.total == pytest.approx(off.outputs["counted_bytes"])
    assert [s.name for s in bar.segments if s.off] == [ml.part_names("adam")[part]]
    for k in ("total_bytes", "static_bytes", "fits", "breaks", key):  # a what-if: the plan is unchanged
        assert off.outputs[k] == full.outputs[k]
    assert off.verdict == full.verdict
    assert off.figures[0][0] == "switched off" and any(n.startswith("A what-if") for n in off.notes)
    assert "off" in rendered(off)


def test_switching_v_off_by_hand():
    """GPT-2 XL, Adam, FP32, batch 4: 91.7 GB in all; without v's 1.5e9 x 4 B the bar is 6 GB shorter."""
    full = mem(model="gpt2-xl", optimizer="adam", precision="fp32", batch=4)
    r = mem(model="gpt2-xl", optimizer="adam", precision="fp32", batch=4, switch_off="v")
    assert r.outputs["counted_bytes"] == pytest.approx(full.outputs["total_bytes"] - 6e9)
    assert r.figures[0] == ("switched off", "v exp_avg_sq, 6.00 GB: the bar shows 85.7 GB of 91.7 GB")
    assert r.outputs["fits"] is False  # training keeps v: still out of memory on the H100
    assert any("Without v, Adam is roughly SGD + momentum" in n for n in r.notes)
    text = rendered(r)
    assert "□ v exp_avg_sq 6.00 GB off" in text
    # activations off: the bar is the static floor
    floor = mem(model="gpt2-xl", switch_off="activations").outputs
    assert floor["counted_bytes"] == floor["static_bytes"] == 24e9


def test_switching_off_a_part_this_setup_lacks_moves_nothing():
    r = mem(optimizer="sgd", switch_off="v")
    assert r.outputs["switched_off_bytes"] == 0 and r.outputs["counted_bytes"] == r.outputs["total_bytes"]
    assert r.figures[0] == ("switched off", "v: this setup has none, so the bar does not move")


# ---------------------------------------------------------------- memory ledger: cards and their power


@pytest.mark.parametrize(
    "card, gib, watts",
    [
        ("h100", 80, 700),
        ("a100", 80, 400),
        ("a100-40", 40, 400),
        ("rtx4090", 24, 450),
        ("rtx3090", 24, 350),
        ("laptop", 8, 115),
    ],
)
def test_each_budget_is_its_cards_memory_and_power(card, gib, watts):
    o = mem(budget=card).outputs
    assert o["budget_bytes"] == gib * GIB and o["budget_watts"] == watts
    label = mem(budget=card).chart.limit_label
    assert f'"{gib} GB"' in label and f"{watts} W" in label
    assert ml.BUDGETS["this"].watts is None and mem(budget="this").outputs["budget_watts"] is None


def test_gpt2_xl_on_a_24_gb_card_fits_in_fp32_but_not_in_mixed_precision():
    """24 GiB = 25.8 GB: FP32 with Adam (16 B a parameter, 24.0 GB) fits at batch 1 checkpointed;
    torch.amp's mixed precision (18 B, 27.0 GB) does not fit before the first batch."""
    given = dict(model="gpt2-xl", optimizer="adam", batch=1, checkpointing=True, budget="rtx3090")
    fp32, mixed = mem(precision="fp32", **given), mem(precision="mixed", **given)
    assert fp32.outputs["fits"] is True and fp32.outputs["total_bytes"] <= 24 * GIB
    assert mixed.outputs["breaks"] == "static floor" and mixed.outputs["static_bytes"] == 27e9
    assert mem(precision="mixed", **{**given, "budget": "a100-40"}).outputs["fits"] is True


# ---------------------------------------------------------------- memory ledger: ResNet-50, Stable Diffusion, GPT-3


def test_resnet50_is_torchvisions_count_with_no_activations_modelled():
    r = mem(model="resnet50", optimizer="adam", precision="fp32")
    o = r.outputs
    assert o["parameters"] == 25_557_032
    assert o["static_bytes"] == o["total_bytes"] == 16 * 25_557_032
    assert o["activations_bytes"] == 0 and o["activations_modelled"] is False
    assert {"batch", "checkpointing"} <= set(r.ignored)  # they move nothing: hidden
    moved = mem(model="resnet50", batch=64, checkpointing=True).outputs
    assert {k: v for k, v in moved.items() if k != "global_batch"} == {
        k: v for k, v in o.items() if k != "global_batch"
    }
    assert "Activations not counted" in r.verdict and "0.5% full" in r.verdict
    assert "activations" not in [s.name for s in r.chart.bars[0].segments]
    assert 'GPU Lab: "ResNet-50: ~100 MB". Its FP32 weights: N x 4 B = 102 MB.' in r.reference


def test_stable_diffusion_counts_its_unet_and_names_what_it_leaves_out():
    r = mem(model="sd-unet", optimizer="adam", precision="fp32")
    assert r.outputs["parameters"] == 860_000_000 and r.outputs["static_bytes"] == 16 * 860e6
    whole = (860e6 + 123e6 + 83.7e6) * 4  # UNet, text encoder, VAE in FP32: the course's "~5 GB"
    assert gb(whole) == "4.27 GB" and "4.27 GB" in r.reference[0] and "~5 GB" in r.reference[0]
    assert any("counted is its UNet" in n and gb((123e6 + 83.7e6) * 4) in n for n in r.notes)


def test_gpt3_weights_alone_are_350_gb_and_fit_no_single_gpu():
    n = 175e9
    for card in ("h100", "a100", "laptop"):
        for precision, optimizer in itertools.product(("fp32", "fp16", "mixed"), ("sgd", "adam")):
            o = mem(model="gpt3", budget=card, precision=precision, optimizer=optimizer, batch=1).outputs
            assert o["breaks"] == "static floor"
    r = mem(model="gpt3", optimizer="adam", precision="fp32")
    assert r.outputs["weights_16bit_gb"] == 350 and r.outputs["static_bytes"] == 16 * n
    assert "the least, SGD in pure FP16, is 700 GB" in r.verdict  # 4 B x 175e9: no optimizer or precision helps
    assert "static floor is 2.80 TB" in r.verdict
    assert any("The weights alone, in 16-bit (N x 2 B), are 350 GB" in note for note in r.notes)
    assert "350 GB (just weights!)" in r.reference[0] and "N x 2 B = 350 GB" in r.reference[0]
    assert "weights alone in 16-bit = N x 2 B = 350 GB" in r.math


def test_gpt3_fits_64_h100s_with_zero3_and_checkpointing_by_hand():
    h, s, layers, v = 12288, 2048, 96, 50_257
    gathered = (v * h + s * h + 2 * h) + (12 * h**2 + 13 * h)  # the root unit and one block
    p = ml.PRESETS["gpt3"]
    acts = layers * s * h * 4 + ml.layer_activation_bytes(p, "fp32") + s * v * (4 + 4)  # batch 1, checkpointed
    o = mem(
        model="gpt3", optimizer="adam", precision="fp32", parallel="zero3", gpus=64, batch=1, checkpointing=True
    ).outputs
    assert o["static_bytes"] == pytest.approx(16 * 175e9 / 64 + 4 * gathered)
    assert o["activations_bytes"] == pytest.approx(acts)
    assert o["fits"] is True and o["total_gb"] == pytest.approx(69.34, abs=0.01)


def test_gb_goes_to_terabytes():
    assert gb(2.8e12) == "2.80 TB" and gb(999.4e9) == "999 GB" and gb(999.96e9) == "1.00 TB"


# ---------------------------------------------------------------- memory ledger: my model


MY_MODEL = {
    "label": "your MLP (3 x 1024 wide, measured)",
    "parameters": 3_150_848,
    "activation_bytes_per_sample": 16384.0,
}


def test_my_model_without_a_measurement_says_how_to_get_one():
    for ctx in (None, Context(), Context(my_model={"parameters": 0})):
        r = LEDGER.compute({"model": "mine"}, ctx)
        assert r.level == "warning"
        assert all(v is None for v in r.outputs.values()) and set(r.outputs) == set(LEDGER.outputs)
        assert "memory-ledger" in r.verdict
        assert r.chart.bars == ()


def test_my_model_uses_the_measured_parameters_and_activations():
    ctx = Context(my_model=MY_MODEL)
    r = LEDGER.compute({"model": "mine", "optimizer": "adam", "precision": "fp32", "batch": 64}, ctx)
    o = r.outputs
    assert o["parameters"] == 3_150_848
    assert o["static_bytes"] == 16 * 3_150_848 and o["bytes_per_param"] == 16
    assert o["activations_bytes"] == 16384.0 * 64
    assert any("measured by your memory-ledger run" in n for n in r.notes)
    assert not r.reference  # the chapter's GPT-2 XL figures are not about this model
    # 16-bit activations are half the measured FP32 ones
    mixed = LEDGER.compute({"model": "mine", "precision": "mixed", "batch": 64}, ctx).outputs
    assert mixed["activations_bytes"] == pytest.approx(o["activations_bytes"] / 2)


def test_my_model_checkpointing_is_not_modelled_and_says_so():
    ctx = Context(my_model=MY_MODEL)
    plain = LEDGER.compute({"model": "mine", "batch": 8}, ctx)
    ckpt = LEDGER.compute({"model": "mine", "batch": 8, "checkpointing": True}, ctx)
    assert ckpt.outputs["activations_bytes"] == plain.outputs["activations_bytes"]
    assert any("not modelled" in n for n in ckpt.notes)


# ---------------------------------------------------------------- memory ledger: across GPUs

PSI = 1.5e9  # GPT-2 XL as the preset quotes it
# ZeRO-3's gathered weights for GPT-2 XL: the root unit (token + position embeddings, final
# LayerNorm) and one block (12h^2 + 13h), h = 1600, V = 50,257, s = 1024
XL_GATHERED = (50_257 * 1600 + 1024 * 1600 + 2 * 1600) + (12 * 1600**2 + 13 * 1600)


def test_gpt2_xl_gathered_unit_by_hand():
    assert XL_GATHERED == 112_793_600
    assert ml.gathered_params(XL) == XL_GATHERED
    # the whole model's blocks and root add up to GPT-2 XL's exact parameter count
    assert 48 * ml.block_params(XL) + ml.root_params(XL) == 1_557_611_200


# per GPU at d = 8 with Adam, by hand: (weights, gradients, 16-bit copies, optimizer, gathered)
BY_HAND_8 = {
    "fp32": {
        "single": (6e9, 6e9, 0, 12e9, 0),
        "ddp": (6e9, 6e9, 0, 12e9, 0),
        "zero1": (6e9, 6e9, 0, 1.5e9, 0),  # 8 B x 1.5e9 / 8
        "zero2": (6e9, 0.75e9, 0, 1.5e9, 0),
        "zero3": (0.75e9, 0.75e9, 0, 1.5e9, XL_GATHERED * 4),
    },
    "mixed": {
        "single": (6e9, 6e9, 3e9, 12e9, 0),
        "ddp": (6e9, 6e9, 3e9, 12e9, 0),
        "zero1": (6e9, 6e9, 3e9, 1.5e9, 0),
        "zero2": (6e9, 0.75e9, 3e9, 1.5e9, 0),
        "zero3": (0.75e9, 0.75e9, 0.375e9, 1.5e9, XL_GATHERED * 2),  # gathered in 16-bit
    },
    "fp16": {
        "single": (3e9, 3e9, 0, 6e9, 0),
        "ddp": (3e9, 3e9, 0, 6e9, 0),
        "zero1": (3e9, 3e9, 0, 0.75e9, 0),
        "zero2": (3e9, 0.375e9, 0, 0.75e9, 0),
        "zero3": (0.375e9, 0.375e9, 0, 0.75e9, XL_GATHERED * 2),
    },
}


@pytest.mark.parametrize("precision, parallel", [(p, m) for p in BY_HAND_8 for m in BY_HAND_8[p]])
def test_per_gpu_bytes_at_8_gpus_by_hand(precision, parallel):
    o = mem(model="gpt2-xl", optimizer="adam", precision=precision, batch=4, parallel=parallel, gpus=8).outputs
    weights, gradients, copies, optimizer, gathered = BY_HAND_8[precision][parallel]
    assert o["weights_bytes"] == pytest.approx(weights)
    assert o["gradients_bytes"] == pytest.approx(gradients)
    assert o["weight_copies_bytes"] == pytest.approx(copies)
    assert o["optimizer_bytes"] == pytest.approx(optimizer)
    assert o["gathered_bytes"] == pytest.approx(gathered)
    assert o["static_bytes"] == pytest.approx(weights + gradients + copies + optimizer + gathered)
    # activations follow the per-GPU batch: the same as one GPU at batch 4
    one = mem(model="gpt2-xl", optimizer="adam", precision=precision, batch=4).outputs
    assert o["activations_bytes"] == one["activations_bytes"]
    assert o["total_bytes"] == pytest.approx(o["static_bytes"] + o["activations_bytes"])
    d = 1 if parallel == "single" else 8
    assert o["gpus_used"] == d and o["global_batch"] == 4 * d
    assert o["all_gpus_gb"] == pytest.approx(d * o["total_gb"])


def test_zero_papers_static_accounting_in_fp32():
    """Per GPU (4 + 4 + 8)Psi for DDP, 4Psi + 4Psi + 8Psi/d, 4Psi + 12Psi/d, 16Psi/d + the gather:
    the ZeRO paper's (2 + 2 + K) columns with this ledger's FP32 bytes."""
    for d in ml.GPUS:
        static = {
            m: mem(parallel=m, gpus=d, optimizer="adam", precision="fp32").outputs["static_bytes"] for m in ml.PARALLEL
        }
        assert static["ddp"] == static["single"] == 16 * PSI
        assert static["zero1"] == pytest.approx((4 + 4) * PSI + 8 * PSI / d)
        assert static["zero2"] == pytest.approx(4 * PSI + (4 + 8) * PSI / d)
        assert static["zero3"] == pytest.approx(16 * PSI / d + (XL_GATHERED * 4 if d > 1 else 0))


@pytest.mark.parametrize("parallel", sorted(ml.PARALLEL))
def test_every_mode_on_one_gpu_is_one_gpu(parallel):
    for precision, optimizer, ckpt in itertools.product(("fp32", "fp16", "mixed"), ("sgd", "adam"), (False, True)):
        given = dict(precision=precision, optimizer=optimizer, checkpointing=ckpt, batch=2, budget="laptop")
        assert mem(parallel=parallel, gpus=1, **given).outputs == mem(**given).outputs


def test_one_gpu_ignores_the_gpus_control_and_says_so():
    base = mem()
    assert base.outputs["gpus_used"] == 1 and base.ignored == ("gpus",)
    assert LEDGER.defaults()["parallel"] == "single" and LEDGER.defaults()["gpus"] == 1
    eight = mem(gpus=8)
    assert eight.outputs == base.outputs and eight.verdict == base.verdict and eight.math == base.math
    assert any("GPUs = 8 is ignored" in n for n in eight.notes)
    assert not any("ignored" in n for n in base.notes)
    lone = mem(parallel="zero3", gpus=1)
    assert any("nothing to replicate or shard" in n for n in lone.notes)


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_more_sharding_never_costs_more_per_gpu(name):
    """ZeRO-3 <= ZeRO-2 <= ZeRO-1 <= DDP per GPU, at every precision, optimizer and GPU count
    (the gathered weights included), and more GPUs never cost more."""
    order = ("ddp", "zero1", "zero2", "zero3")
    for precision, optimizer, d in itertools.product(("fp32", "fp16", "mixed"), ("sgd", "momentum", "adam"), ml.GPUS):
        totals = [
            mem(model=name, precision=precision, optimizer=optimizer, parallel=m, gpus=d).outputs["total_bytes"]
            for m in order
        ]
        assert totals == sorted(totals, reverse=True), (precision, optimizer, d, totals)
        if d > 1 and optimizer != "sgd":
            assert totals[0] > totals[1] > totals[2] > totals[3]
    for m in order:
        per_gpu = [mem(model=name, parallel=m, gpus=d).outputs["total_bytes"] for d in ml.GPUS]
        assert per_gpu == sorted(per_gpu, reverse=True)


def test_gpt2_xl_on_8_laptop_gpus_fits_with_zero3_and_checkpointing_not_with_ddp():
    """The laptop challenge across 8 GPUs: DDP's replicas each hold 24 GB of states and never fit
    with Adam; ZeRO-3 with checkpointing fits in FP32 at batch 4 per GPU."""
    laptop = dict(model="gpt2-xl", optimizer="adam", budget="laptop", gpus=8)
    for precision, batch, ckpt in itertools.product(
        ("fp32", "fp16", "mixed"), LEDGER.control("batch").options, (False, True)
    ):
        r = mem(parallel="ddp", precision=precision, batch=batch, checkpointing=ckpt, **laptop)
        assert r.outputs["fits"] is False and r.outputs["breaks"] == "static floor"
    r = mem(parallel="ddp", precision="fp32", **laptop)
    assert "24.0 GB per GPU" in r.verdict and "more GPUs do not help" in r.verdict
    fit = mem(parallel="zero3", precision="fp32", batch=4, checkpointing=True, **laptop)
    o = fit.outputs
    assert o["fits"] is True and o["breaks"] == "none"
    assert o["static_bytes"] == pytest.approx(3e9 + XL_GATHERED * 4)  # 16 B x 1.5e9 / 8 + the gather
    assert o["total_bytes"] <= 8 * GIB
    assert fit.verdict.startswith("Fits: 7.73 GB of 8.59 GB (8.0 GiB) per GPU")
    assert any(n.startswith("Tight") for n in fit.notes)
    # without checkpointing the activations break it; ZeRO-3 alone is not enough
    assert mem(parallel="zero3", precision="fp32", batch=4, **laptop).outputs["breaks"] == "activations"


def _every_pair_of_values(controls: list[Control]):
    """Settings in which every value of each control meets every value of each other control at
    least once (a pairwise design: 845 settings where the memory ledger's product is 214,200);
    the controls not in the pair take values that turn with the pair's, so they vary too."""
    for (i, first), (j, second) in itertools.combinations(enumerate(controls), 2):
        for a, b in itertools.product(range(len(first.options)), range(len(second.options))):
            values = [c.options[(a + b + k) % len(c.options)] for k, c in enumerate(controls)]
            values[i], values[j] = first.options[a], second.options[b]
            yield {c.name: v for c, v in zip(controls, values)}


@pytest.mark.parametrize("name", ["memory-ledger", "pipeline"])
def test_compute_outputs_is_computes_outputs(name):
    """The words-free path `lesson test` searches with gives exactly what the reading shows."""
    inst = REGISTRY[name]
    contexts = (None, Context(my_model=MY_MODEL, my_pipeline=MEASURED, device_name="Test GPU", device_memory=8 * GIB))
    for settings in _every_pair_of_values(list(inst.controls)):
        for ctx in contexts:
            assert inst.compute_outputs(settings, ctx) == inst.compute(settings, ctx).outputs, settings


def test_goal_search_with_the_parallel_controls_is_fast_and_finds_the_fewest_moves():
    from tutor.authoring.lesson_test import goal_settings
    from tutor.course.lesson import InstrumentStep

    start = dict(
        model="gpt2-xl",
        optimizer="adam",
        precision="fp32",
        batch=4,
        checkpointing=False,
        parallel="ddp",
        gpus=8,
        budget="laptop",
    )
    step = InstrumentStep(
        id="x",
        kind="instrument",
        instrument="memory-ledger",
        set=start,
        fixed=["model", "budget", "gpus", "optimizer"],
        goal={"output": "fits", "equals": True},
    )
    start = LEDGER.settings(start)  # switch_off at its default: a what-if that never makes a plan fit
    best, tried = goal_settings(step)
    assert {k: v for k, v in best.items() if start[k] != v} == {"checkpointing": True, "parallel": "zero3"}
    assert tried < 100  # one and two moves, not the product of every control's options
    # every control free but the model and the budget: still a level-by-level search
    free = step.model_copy(update={"fixed": ["model", "budget"]})
    best, tried = goal_settings(free)
    assert {k: v for k, v in best.items() if start[k] != v} == {"checkpointing": True, "parallel": "zero3"}
    assert tried < 300  # switch_off's 7 parts join the two-move level; the product would be ~10^5


def test_zero_stage_math_and_figures_say_per_gpu_and_the_global_batch():
    r = mem(parallel="zero1", gpus=8, optimizer="adam", precision="fp32", batch=4)
    text = "\n".join(r.math)
    assert "ZeRO-1 over 8 GPUs, figures per GPU" in text
    assert "adam        = N x 8 B / 8 = 1.50 GB  (ZeRO-1: each of the 8 GPUs keeps 1/8 of Adam's moments" in text
    assert "weights     = N x 4 B = 6.00 GB  (a full replica on each GPU)" in text
    assert "(batch 4 per GPU; global batch 8 x 4 = 32)" in text
    assert "all 8 GPUs: 8 x " in text
    figures = dict(r.figures)
    assert figures["global batch"].startswith("32 = 8 GPUs x 4 per GPU")
    assert "per GPU" in figures["total"] and "per GPU" in r.verdict
    assert r.chart.bars[0].label == "per GPU"
    z3 = mem(parallel="zero3", gpus=8, precision="fp32")
    z3_text = "\n".join(z3.math)
    assert "gathered    = (Vh + sh + 2h) + (12h^2 + 13h) = 112.8M x 4 B = 451 MB" in z3_text
    assert "weights     = N x 4 B / 8 = 750 MB  (ZeRO-3: each of the 8 GPUs keeps 1/8)" in z3_text
    assert any("ZeRO paper" in ref for ref in z3.reference)
    assert not any("ZeRO paper" in ref for ref in mem().reference)


def test_zero3_draws_the_gathered_weights_and_mixed_says_how_fsdp_casts():
    r = mem(parallel="zero3", gpus=8, precision="mixed", optimizer="adam", batch=4)
    (bar,) = r.chart.bars
    assert [s.name for s in bar.segments] == [
        "weights",
        "gradients",
        "16-bit weight copies",
        "m exp_avg",
        "v exp_avg_sq",
        "gathered weights",
        "activations",
    ]
    assert bar.total == pytest.approx(r.outputs["total_bytes"])
    notes = " ".join(r.notes)
    assert "MixedPrecision(param_dtype=bfloat16)" in notes and "3.00 GB per GPU, unsharded" in notes
    assert "1.5x DDP's communication volume" in notes
    assert "gathered weights" not in [s.name for s in mem(parallel="zero2", gpus=8).chart.bars[0].segments]
    ddp = " ".join(mem(parallel="ddp", gpus=8).notes)
    assert "full replica" in ddp and "gradient_as_bucket_view" in ddp
    z1 = " ".join(mem(parallel="zero1", gpus=8, precision="mixed").notes)
    assert "2 + 2 + 12/8 = 5.5 B per parameter at ZeRO-1" in z1


def test_my_model_under_zero3_is_one_unit_gathered_whole():
    ctx = Context(my_model=MY_MODEL)
    r = LEDGER.compute(
        {"model": "mine", "parallel": "zero3", "gpus": 4, "precision": "fp32", "optimizer": "adam", "batch": 64}, ctx
    )
    n = MY_MODEL["parameters"]
    assert r.outputs["gathered_bytes"] == 4 * n
    assert r.outputs["static_bytes"] == pytest.approx(16 * n / 4 + 4 * n)
    assert any("one FSDP unit" in note for note in r.notes)


def test_parallel_and_gpus_parse():
    c = LEDGER.control("parallel")
    assert c.parse("ZeRO3") == "zero3" and c.parse("ddp") == "ddp" and c.default == "single"
    with pytest.raises(SettingsError, match="single, ddp, zero1, zero2, zero3"):
        c.parse("fsdp")
    g = LEDGER.control("gpus")
    assert g.parse("8") == 8 and g.parse(3) == 3 and g.options == (1, 2, 4, 8, 16, 32, 64)
    assert g.step(8, +1) == 16 and g.step(3, -1) == 2
    with pytest.raises(SettingsError, match=r"outside 1\.\.64"):
        g.parse(0)
    assert mem(parallel="zero3", gpus=3).outputs["weights_bytes"] == pytest.approx(6e9 / 3)


# ---------------------------------------------------------------- pipeline


def test_pipeline_defaults_reproduce_the_chapter_baseline():
    o = pipe().outputs
    assert o["data_share"] == pytest.approx(0.40, abs=1e-12)
    assert o["transfer_share"] == pytest.approx(0.25, abs=1e-12)
    assert o["compute_share"] == pytest.approx(0.35, abs=1e-12)
    assert o["mfu"] == pytest.approx(0.35 * 0.8, abs=1e-12)
    assert o["mfu"] == pytest.approx(0.35 * pl.EFFICIENCY)


def test_pipeline_baseline_compute_time_is_6_n_tokens_over_peak():
    o = pipe(batch=4).outputs
    tokens = 4 * 1024
    assert compute_seconds(o) == pytest.approx(6 * 1.5e9 * tokens / (156e12 * 0.8))
    assert o["tokens_per_second"] == pytest.approx(tokens / o["iteration_seconds"])
    hours = 6 * 1.5e9 * 1e9 / (156e12 * o["mfu"]) / 3600
    assert o["hours_per_billion_tokens"] == pytest.approx(hours)


def test_mixed_precision_halves_compute_time():
    for prefetch, ckpt in itertools.product((False, True), repeat=2):
        fp32 = pipe(precision="fp32", prefetch=prefetch, checkpointing=ckpt).outputs
        mixed = pipe(precision="mixed", prefetch=prefetch, checkpointing=ckpt).outputs
        assert compute_seconds(mixed) == pytest.approx(compute_seconds(fp32) / 2)


def test_mixed_precision_alone_makes_the_data_wait_a_larger_share():
    assert pipe(precision="mixed").outputs["data_share"] > pipe().outputs["data_share"]


def test_prefetch_removes_the_data_wait_in_the_baseline():
    before, after = pipe(prefetch=False).outputs, pipe(prefetch=True).outputs
    assert data_seconds(before) > 0
    assert after["data_share"] == 0
    assert after["mfu"] > before["mfu"]
    assert compute_seconds(after) == pytest.approx(compute_seconds(before))


@pytest.mark.parametrize(
    "prefetch, precision, checkpointing, batch",
    list(itertools.product((False, True), ("fp32", "mixed"), (False, True), (1, 4, 64))),
)
def test_mfu_never_exceeds_compute_share_times_efficiency(prefetch, precision, checkpointing, batch):
    o = pipe(prefetch=prefetch, precision=precision, checkpointing=checkpointing, batch=batch).outputs
    assert 0 < o["mfu"] <= o["compute_share"] * pl.EFFICIENCY + 1e-12
    assert o["data_share"] + o["transfer_share"] + o["compute_share"] == pytest.approx(1.0)
    assert all(0 <= o[k] <= 1 for k in ("data_share", "transfer_share", "compute_share", "mfu"))


@pytest.mark.parametrize(
    "prefetch, precision, checkpointing", list(itertools.product((False, True), ("fp32", "mixed"), (False, True)))
)
def test_batch_size_moves_memory_not_shares(prefetch, precision, checkpointing):
    small = pipe(prefetch=prefetch, precision=precision, checkpointing=checkpointing, batch=1).outputs
    big = pipe(prefetch=prefetch, precision=precision, checkpointing=checkpointing, batch=64).outputs
    for key in ("data_share", "transfer_share", "compute_share", "mfu"):
        assert big[key] == pytest.approx(small[key])
    assert big["iteration_seconds"] == pytest.approx(64 * small["iteration_seconds"])
    assert big["memory_bytes"] > small["memory_bytes"]


def test_pipeline_memory_is_the_ledgers_adam_total():
    o = pipe(precision="mixed", batch=8, checkpointing=True).outputs
    led = mem(model="gpt2-xl", optimizer="adam", precision="mixed", batch=8, checkpointing=True).outputs
    assert o["memory_bytes"] == pytest.approx(led["total_bytes"])
    assert o["memory_gb"] == pytest.approx(o["memory_bytes"] / 1e9)
    assert pipe(batch=4).outputs["fits"] is False  # 90 GB > 80 GiB
    assert pipe(batch=1).outputs["fits"] is True


def test_pipeline_reference_has_the_chapter_figures_and_the_correction():
    r = pipe()
    text = "\n".join(r.reference)
    assert "45% MFU" in text and "40% data loading / 25% transfers (memory traffic) / 35% compute" in text

    assert "85% MFU" in text and "89 GB -> 32 GB" in text
    assert "4x less activation memory" in text
    assert pl.CORRECTION in r.reference
    assert "MFU cannot exceed the share of time spent computing" in text
    assert r.gauge is not None and r.gauge.value == pytest.approx(r.outputs["mfu"])


def test_the_models_transfers_are_named_memory_traffic_not_host_copies():
    """The chapter's "transfers" (25-42% of a GPT-2 XL step) are kernels reading and writing GPU
    memory; a learner reading "transfers" thinks of host-to-device copies (issue 24)."""
    r = pipe()
    names = {seg.name for bar in r.chart.bars for seg in bar.segments}
    assert "memory traffic" in names and "transfers" not in names
    assert "not host copies" in pl.Pipeline.outputs["transfer_share"]
    assert any(line.startswith("memory traffic = ") for line in r.math)
    assert dict(r.gauge.marks) == {"chapter's claim, base": 0.45, "chapter's claim, best": 0.85}


def test_the_gauges_marks_are_the_chapters_claims_beside_what_its_profiles_give():
    """Issue 35: "▲ chapter base 45%" under a baseline gauge at 28%, with nothing said between."""
    r = pipe()  # the chapter's baseline settings
    assert r.outputs["mfu"] == pytest.approx(pl.BASELINE["compute"] * pl.EFFICIENCY)
    note = r.notes[0]
    assert "the MFUs the chapter states" in note
    assert "its baseline's 35% computing gives 28% (the gauge at the baseline settings), not 45%" in note
    assert "its best's 75% gives 60%, not 85%" in note
    measured = PIPELINE.compute({"profile": "measured"}, Context(my_pipeline=MEASURED))
    assert measured.notes[0] == note  # the marks are on that gauge too


@pytest.mark.parametrize(
    "optimizer, line",
    [
        ("adam", ("Adam adds", "12.0 GB over plain SGD at this precision")),
        ("sgd", ("Adam instead", "would add 12.0 GB to this plain SGD, at this precision")),
        (
            "momentum",
            ("Adam instead", "would add 6.00 GB to this SGD + momentum (12.0 GB over plain SGD), at this precision"),
        ),
    ],
)
def test_what_adam_adds_is_said_against_the_optimizer_chosen(optimizer, line):
    """Issue 35: "Adam adds 12.0 GB over SGD" with SGD + momentum selected, which keeps one of Adam's
    two buffers already."""
    r = mem(model="gpt2-xl", optimizer=optimizer, precision="fp32")
    assert line in r.figures
    assert r.outputs["adam_extra_gb"] == pytest.approx(12.0)  # the output a lesson compares: over plain SGD


def test_pipeline_chart_shares_sum_to_one():
    for bar in pipe(prefetch=True, precision="mixed").chart.bars:
        assert bar.total == pytest.approx(1.0)


# ---------------------------------------------------------------- pipeline: money and energy

BASE_HOURS = 6 * 1.5e9 * 1e9 / (156e12 * 0.35 * 0.8) / 3600  # the baseline: MFU 28% of TF32's peak


def test_cost_energy_and_co2_per_billion_tokens_by_hand():
    o = pipe().outputs  # $2 per GPU-hour, 400 W, 0.4 kg CO2 per kWh
    assert round(BASE_HOURS, 3) == 57.234
    assert o["hours_per_billion_tokens"] == pytest.approx(BASE_HOURS)
    assert o["cost_per_billion_tokens"] == pytest.approx(2 * BASE_HOURS)  # $114.47
    assert o["energy_kwh_per_billion_tokens"] == pytest.approx(400 * BASE_HOURS / 1000)  # 22.9 kWh
    assert o["co2_kg_per_billion_tokens"] == pytest.approx(0.4 * 400 * BASE_HOURS / 1000)  # 9.16 kg
    other = pipe(price=3.5, power=700, grid=0.05).outputs
    assert other["cost_per_billion_tokens"] == pytest.approx(3.5 * BASE_HOURS)
    assert other["energy_kwh_per_billion_tokens"] == pytest.approx(0.7 * BASE_HOURS)
    assert other["co2_kg_per_billion_tokens"] == pytest.approx(0.05 * 0.7 * BASE_HOURS)
    # the levers move money and energy, never the time: MFU and hours stay
    assert other["mfu"] == o["mfu"] and other["hours_per_billion_tokens"] == o["hours_per_billion_tokens"]
    # a faster setup is cheaper by exactly its hours
    best = pipe(prefetch=True, precision="mixed").outputs
    assert best["cost_per_billion_tokens"] == pytest.approx(2 * best["hours_per_billion_tokens"])
    assert best["cost_per_billion_tokens"] < o["cost_per_billion_tokens"]


def test_llama2_70b_is_priced_from_its_papers_gpu_hours():
    o = pipe().outputs
    assert o["llama2_70b_cost"] == 1_720_320 * 2 == 3_440_640  # $3.44M, the course's "$2M" is too low
    assert o["llama2_70b_energy_mwh"] == pytest.approx(1_720_320 * 400 / 1e6)  # 688 MWh
    assert o["llama2_70b_co2_t"] == pytest.approx(688.128 * 0.4)  # 275 t; the paper's own estimate is 291 t
    r = pipe()
    text = "\n".join(r.reference)
    assert "~1M GPU-hours" in text and "1,720,320 A100-80GB GPU-hours" in text and "3,311,616" in text
    assert "$3.44M at the lab's $2, not $2M" in text
    assert "implies a grid of 0.42 kg CO2 per kWh" in text  # 291.42 t / 688.128 MWh
    assert dict(r.figures)["LLaMA-2 70B"] == "1,720,320 GPU-h x $2.00 = $3.44M; 688 MWh, 275 t CO2"
    mfu = 6 * 70e9 * 2e12 / (1_720_320 * 3600 * 312e12)
    assert round(mfu * 100) == 43 and any(line.endswith(f"= {round(mfu * 100)}%") for line in r.math)
    assert pipe(price=1.0).outputs["llama2_70b_cost"] == 1_720_320


def test_money_and_energy_are_formulas_on_screen():
    r = pipe()
    text = rendered(r)
    assert "cost   = GPU-hours x price = 57.2 h x $2.00 = $114.47 per billion tokens" in text
    assert "energy = GPUs x TDP x hours = 1 x 400 W x 57.2 h = 22.9 kWh" in text
    assert "CO2    = energy x grid = 22.9 kWh x 0.4 kg/kWh (assumed) = 9.2 kg" in text
    assert "A billion tokens: 57.2 GPU-hours, $114.47, 22.9 kWh, 9.2 kg CO2." in r.verdict
    assert not any("Power" in n for n in r.notes)
    assert any(n.startswith("Power 700 W is not the A100's 400 W") for n in pipe(power=700).notes)


def test_price_power_and_grid_controls_parse_step_and_label():
    price, power, grid = (PIPELINE.control(n) for n in ("price", "power", "grid"))
    assert price.default == 2.0 and power.default == 400 and grid.default == 0.4
    assert price.parse("2.5") == 2.5 and price.parse("$1.50") == 1.5 and price.parse(3) == 3.0
    for bad in ("abc", "nan", "inf", True):
        with pytest.raises(SettingsError, match="expected a number"):
            price.parse(bad)
    with pytest.raises(SettingsError, match=r"outside 0\.5\.\.8"):
        price.parse("20")
    assert price.step(2.0, +1) == 3.0 and price.step(2.5, -1) == 2.0
    assert price.label_of(2.0) == "$2.00 per GPU-hour" and price.label_of(2.5) == "$2.50 per GPU-hour"
    assert power.options == (115, 350, 400, 450, 700)  # each card the ledger names, at its vendor TDP
    assert power.label_of(400) == "400 W (A100 SXM)" and power.label_of(115) == "115 W (RTX 4060 laptop)"
    assert power.label_of(250) == "250 W" and power.parse("250") == 250
    assert grid.label_of(0.4) == "0.4 kg CO2 per kWh (assumed)" and grid.parse("0.05") == 0.05
    assert PIPELINE.describe({"price": 3}) == "price $3.00 per GPU-hour"


# ---------------------------------------------------------------- pipeline: measured profile


MEASURED = {
    "mfu": 0.0042,
    "data_wait_share": 0.30,
    "copy_share": 0.10,
    "forward_share": 0.25,
    "backward_share": 0.25,
    "optimizer_share": 0.10,
    "peak_tflops": 19.5,
    "achieved_tflops": 0.0819,
    "model": "mlp",
    "batch_size": 64,
    "dtype": "float32",
    "data_path": "loader",
}


def test_measured_profile_without_a_run_says_how_to_get_one():
    for ctx in (None, Context(), Context(my_pipeline={"mfu": None})):
        r = PIPELINE.compute({"profile": "measured"}, ctx)
        assert r.level == "warning" and "pipeline-breakdown" in r.verdict
        assert all(v is None for v in r.outputs.values()) and set(r.outputs) == set(PIPELINE.outputs)


def test_measured_profile_draws_the_run():
    r = PIPELINE.compute({"profile": "measured"}, Context(my_pipeline=MEASURED))
    o = r.outputs
    assert set(o) == set(PIPELINE.outputs)
    assert o["mfu"] == pytest.approx(0.0042)
    assert o["data_share"] == pytest.approx(0.30) and o["transfer_share"] == pytest.approx(0.10)
    assert o["compute_share"] == pytest.approx(0.60)  # forward + backward + optimizer
    assert o["iteration_seconds"] is None and o["memory_bytes"] is None
    assert r.level == "ok"
    assert "0.42%" in r.verdict and "19.5 TFLOP/s" in r.verdict
    assert "mlp model, batch 64, float32, data loader" in r.verdict
    assert "your device" in r.verdict
    bar, *reference = r.chart.bars  # the run, then the chapter's two bars for comparison
    assert [b.label for b in reference] == ["chapter base", "chapter best"]
    assert [s.name for s in bar.segments] == ["data loading", "copy to device", "compute"]
    assert bar.total == pytest.approx(1.0)
    named = PIPELINE.compute({"profile": "measured"}, Context(my_pipeline={**MEASURED, "device_name": "Test GPU"}))
    assert "Measured on Test GPU" in named.verdict


def test_measured_profile_ignores_the_model_levers():
    for ctx in (None, Context(my_pipeline=MEASURED)):
        r = PIPELINE.compute({"profile": "measured"}, ctx)
        assert set(r.ignored) == {"prefetch", "precision", "checkpointing", "batch", "price", "power", "grid"}
        assert all(
            r.outputs[k] is None for k in ("cost_per_billion_tokens", "llama2_70b_cost", "co2_kg_per_billion_tokens")
        )
        assert set(r.ignored) < {c.name for c in PIPELINE.controls}
    assert pipe().ignored == ()
    assert mem().ignored == ("gpus",)  # one GPU: the GPUs control does not matter, and is hidden
    assert mem(parallel="ddp").ignored == ()


def test_modelled_profile_ignores_the_measured_run():
    assert PIPELINE.compute({}, Context(my_pipeline=MEASURED)).outputs == pipe().outputs


# ---------------------------------------------------------------- controls


def test_toggle_parse():
    c = LEDGER.control("checkpointing")
    for raw in ("on", "ON", "true", "yes", "1", True):
        assert c.parse(raw) is True
    for raw in ("off", "false", "no", "0", False):
        assert c.parse(raw) is False
    with pytest.raises(SettingsError, match="expected on or off"):
        c.parse("maybe")


def test_choice_parse_names_the_valid_options():
    c = LEDGER.control("optimizer")
    assert c.parse("ADAM") == "adam" and c.parse(" sgd ") == "sgd"
    with pytest.raises(SettingsError) as info:
        c.parse("adamw")
    assert "optimizer" in str(info.value) and "sgd, momentum, adam" in str(info.value)
    with pytest.raises(SettingsError, match="fp32, mixed"):
        PIPELINE.control("precision").parse("fp16")


def test_stepper_parse_and_range():
    c = PIPELINE.control("batch")
    assert c.parse("16") == 16 and c.parse(3) == 3 and c.parse("1_0") == 10  # any whole number in range
    lo, hi = c.options[0], c.options[-1]
    assert c.parse(lo) == lo and c.parse(hi) == hi
    with pytest.raises(SettingsError, match="outside"):
        c.parse(0)
    with pytest.raises(SettingsError, match="outside"):
        c.parse(hi + 1)
    with pytest.raises(SettingsError, match="whole number"):
        c.parse("four")
    with pytest.raises(SettingsError, match="outside"):
        LEDGER.control("batch").parse(10**9)


def test_control_step_stops_at_the_ends():
    batch = PIPELINE.control("batch")
    assert batch.step(4, +1) == 8 and batch.step(4, -1) == 2
    assert batch.step(3, +1) == 4 and batch.step(3, -1) == 2  # a value between options snaps to one
    assert batch.step(batch.options[-1], +1) == batch.options[-1]
    assert batch.step(batch.options[0], -1) == batch.options[0]
    opt = LEDGER.control("optimizer")
    assert opt.step("sgd", -1) == "sgd" and opt.step("adam", +1) == "adam"
    assert opt.step("sgd", +1) == "momentum" and opt.step("momentum", -1) == "sgd"
    toggle = LEDGER.control("checkpointing")
    assert toggle.step(False, +1) is True and toggle.step(True, -1) is False


def test_control_labels():
    assert LEDGER.control("optimizer").label_of("adam") == "Adam"
    assert LEDGER.control("checkpointing").label_of(True) == "on"
    assert PIPELINE.control("batch").label_of(4) == "4"
    c = Control("n", "N", "stepper", (1, 100000), 1)
    assert c.label_of(20000) == "20,000"


def test_settings_reject_an_unknown_control_and_fill_defaults():
    with pytest.raises(SettingsError) as info:
        LEDGER.settings({"nope": 1})
    assert "no control 'nope'" in str(info.value) and "optimizer" in str(info.value)
    s = LEDGER.settings({"optimizer": "SGD", "checkpointing": "on", "batch": "8"})
    assert s == {**LEDGER.defaults(), "optimizer": "sgd", "checkpointing": True, "batch": 8}
    assert LEDGER.settings() == LEDGER.defaults()
    with pytest.raises(SettingsError):
        LEDGER.compute({"precision": "fp8"})


# ---------------------------------------------------------------- render


def rendered(r, math: bool = True) -> str:
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    console.print(render.reading(r, 78, math=math))
    return console.export_text()


READINGS = {
    "ledger default": lambda: mem(),
    "ledger laptop oom": lambda: mem(budget="laptop"),
    "ledger fits": lambda: mem(optimizer="sgd", precision="fp16", batch=1, checkpointing=True, budget="laptop"),
    "ledger largest batch": lambda: mem(precision="mixed", batch=LEDGER.control("batch").options[-1]),
    "ledger mine": lambda: LEDGER.compute(
        {"model": "mine", "budget": "this"}, Context(my_model=MY_MODEL, device_name="Test GPU", device_memory=8 * GIB)
    ),
    "ledger no model": lambda: LEDGER.compute({"model": "mine"}),
    "ledger ddp": lambda: mem(parallel="ddp", gpus=8, budget="laptop"),
    "ledger zero3 mixed": lambda: mem(
        parallel="zero3", gpus=64, precision="mixed", batch=1, checkpointing=True, budget="laptop"
    ),
    "ledger zero1 mixed": lambda: mem(parallel="zero1", gpus=8, precision="mixed"),
    "ledger zero3 mine": lambda: LEDGER.compute(
        {"model": "mine", "parallel": "zero3", "gpus": 2, "budget": "this"}, Context(my_model=MY_MODEL)
    ),
    "pipeline default": lambda: pipe(),
    "pipeline best": lambda: pipe(prefetch=True, precision="mixed", checkpointing=True, batch=64),
    "pipeline money": lambda: pipe(price=8, power=700, grid=0.9, prefetch=True),
    "ledger gpt3": lambda: mem(model="gpt3", budget="laptop", switch_off="v"),
    "ledger resnet50": lambda: mem(model="resnet50", budget="rtx3090", switch_off="activations"),
    "ledger sd zero3": lambda: mem(model="sd-unet", parallel="zero3", gpus=4, precision="mixed"),
    "pipeline measured": lambda: PIPELINE.compute({"profile": "measured"}, Context(my_pipeline=MEASURED)),
    "pipeline no run": lambda: PIPELINE.compute({"profile": "measured"}),
}


@pytest.mark.parametrize("name", sorted(READINGS))
def test_reading_fits_80_columns(name):
    r = READINGS[name]()
    text = rendered(r)
    lines = text.splitlines()
    assert lines
    assert max(cell_len(line) for line in lines) <= 80
    if r.math:
        assert "Math peek" in text


def test_math_peek_shows_the_formulas_with_numbers():
    text = rendered(mem(model="gpt2-xl", optimizer="adam", precision="fp32", batch=4))
    assert "Math peek" in text
    assert "N = 1,500,000,000 parameters" in text
    assert "weights     = N x 4 B = 6.00 GB" in text
    assert "adam        = N x 8 B = 12.0 GB" in text
    assert "GB = 10^9 bytes, GiB = 2^30 bytes" in text
    assert "Out of memory" in text
    without = rendered(mem(), math=False)
    assert "Math peek" not in without and "N = 1,500,000,000" not in without


def test_pipeline_render_shows_the_gauge_and_reference():
    text = rendered(pipe(), math=True)
    assert "MFU" in text and "28%" in text
    assert "chapter's claim, base 45%" in text and "chapter's claim, best 85%" in text
    assert "MFU = 6 N tokens / (iteration" in text
    assert "Chapter (reference)" in text


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_a_control_changes_only_the_outputs_it_says_it_affects(name):
    """`affects` lets lesson test's goal search leave a control out: it must be true. Checked at
    the defaults and with every other control at each of its options in turn."""
    instrument = REGISTRY[name]
    narrow = [c for c in instrument.controls if c.affects]
    base = instrument.settings({})
    starts = [base] + [{**base, other.name: option} for other in instrument.controls for option in other.options]
    for control in narrow:
        for start in starts:
            if instrument.needs_context(start):  # the learner's own runs: nothing to compare here
                continue
            reference = instrument.compute_outputs(start)
            for option in control.options:
                outputs = instrument.compute_outputs({**start, control.name: option})
                changed = {k for k in outputs if outputs[k] != reference[k]}
                assert changed <= set(control.affects), (control.name, option, changed - set(control.affects))
