"""pipeline: where one training iteration's time goes, and the MFU that leaves.

The scenario is the chapter's: GPT-2 XL (N = 1.5e9 parameters) trained on one A100 with
sequences of s = 1024 tokens. Its measured baseline profile is the starting point:
40% of the iteration waiting for data, 25% in memory traffic (kernels reading and writing GPU memory; the chapter says
"transfers", which are not host-to-device copies), 35% computing.

From there each lever changes the phases by a formula:

- compute time = 6 N tokens / (peak x E): FLOPs over the speed the matrix multiplies run
  at. Peak is the A100's dense tensor-core figure for the dtype: TF32 156 TFLOP/s for FP32
  training (with TF32 matmuls allowed), 312 for FP16/BF16. E = 0.8 is an assumption: large
  matrix multiplies reach about 80% of peak.
- mixed precision: twice the peak, so compute time halves; half the bytes per value, so
  memory traffic halves too.
- gradient checkpointing: the forward pass runs twice, 8 N instead of 6 N FLOPs per token,
  so compute and memory traffic take 4/3 as long; activation memory shrinks (memory-ledger).
- prefetching (DataLoader with 4 workers, pinned memory, non_blocking copies): batches are
  prepared by 4 processes while the GPU works, so the GPU waits only for what loading
  takes beyond the GPU's own time: max(0, data / 4 - (memory traffic + compute)).
- batch size: every phase scales with the tokens in the batch, so the shares do not move;
  memory does.

MFU = model FLOPs per second / peak = 6 N tokens / (iteration time x peak). It can never
exceed the share of time spent computing times E: that is the check the chapter's own
reference figures fail (45% MFU with 35% of the time computing).

Compute is money and energy (the course's Lab 5). The Iron Law's hours are GPU-hours: spread
over G GPUs at the same MFU, a run takes 1/G of the time on each of G GPUs. Per billion tokens:

    cost   = GPU-hours x price                    ($ per GPU-hour, a control)
    energy = GPUs x TDP x hours = GPU-hours x TDP  (W per GPU, a control: each GPU drawing its
                                                    TDP the whole run, an upper bound for the
                                                    GPUs; host, network and cooling not counted)
    CO2    = energy x the grid's carbon intensity  (kg CO2 per kWh, an assumption, a control)

LLaMA-2 70B is priced the same way from its paper's own figure, 1,720,320 A100-80GB GPU-hours
(Touvron et al. 2023, Table 2; 3,311,616 for all four sizes): the course's "~1M GPU-hours, $2M
at $2/hour" is too low. Its Iron Law check: 6 x 70e9 x 2e12 tokens in those hours at the A100's
312 TFLOP/s is 43% MFU, beside PaLM's 46%.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from tutor.instruments import memory_ledger as ml
from tutor.instruments.instrument import (
    Bar,
    Chart,
    Context,
    Control,
    Gauge,
    Instrument,
    Reading,
    Segment,
    gb,
    percent,
)

N = ml.PRESETS["gpt2-xl"].params
SEQ = ml.PRESETS["gpt2-xl"].seq
PEAK = {"fp32": 156e12, "mixed": 312e12}  # A100 dense tensor-core FLOP/s: TF32, FP16/BF16
PEAK_LABEL = {"fp32": "TF32 156 TFLOP/s", "mixed": "FP16 312 TFLOP/s"}
EFFICIENCY = 0.8  # assumed: the share of peak that large matmuls reach
WORKERS = 4
BASELINE = {"data": 0.40, "memory traffic": 0.25, "compute": 0.35}  # the chapter's measured baseline profile


def _card_memory(card: str) -> int:
    """A named card's budget in bytes (every card's is known; only "this" machine's may be None)."""
    budget = ml.BUDGETS[card][1]
    assert budget is not None, card
    return budget


A100_MEMORY = _card_memory("a100")

CHAPTER = (
    "Chapter (reference): baseline 45% MFU, time 40% data loading / 25% transfers (memory traffic) / 35% compute.",
    "Chapter (reference): optimised 85% MFU, 5% data loading / 75% compute; memory 89 GB -> 32 GB.",
    "Chapter (reference): checkpointing, 4x less activation memory for about 33% more compute.",
)
CORRECTION = (
    "MFU cannot exceed the share of time spent computing: 45% MFU with 35% of the time computing "
    "would need the GPU to run at 129% of its peak, and 85% with 75% at 113%. Large published "
    "training runs report around half of peak (PaLM: 46%). And the baseline's 89 GB would not fit "
    "one 80 GB A100."
)
CHAPTER_BARS = (
    Bar(
        "chapter base",
        (
            Segment("data loading", 0.40, "red"),
            Segment("memory traffic", 0.25, "yellow"),
            Segment("compute", 0.35, "green"),
        ),
    ),
    Bar(
        "chapter best",
        (
            Segment("data loading", 0.05, "red"),
            Segment("memory traffic", 0.20, "yellow"),
            Segment("compute", 0.75, "green"),
        ),
    ),
)
# The MFUs the chapter states: marked on the gauge as its claims, beside what its own profiles allow.
CHAPTER_MARKS = (("chapter's claim, base", 0.45), ("chapter's claim, best", 0.85))
CHAPTER_COMPUTE = {"chapter's claim, base": BASELINE["compute"], "chapter's claim, best": 0.75}


def chapter_marks_note() -> str:
    """Why the gauge's marks sit above what this model gives the chapter's own profiles: here MFU is
    the share of time computing x E."""
    (base, base_at), (best, best_at) = CHAPTER_MARKS
    return (
        "The ▲ marks are the MFUs the chapter states, not what its own profiles give: here MFU is the share "
        f"of time computing x E {EFFICIENCY} (the share of peak the matmuls reach), so its baseline's "
        f"{percent(CHAPTER_COMPUTE[base])} computing gives {percent(CHAPTER_COMPUTE[base] * EFFICIENCY)} (the "
        f"gauge at the baseline settings), not {percent(base_at)}; its best's {percent(CHAPTER_COMPUTE[best])} "
        f"gives {percent(CHAPTER_COMPUTE[best] * EFFICIENCY)}, not {percent(best_at)}."
    )


# Compute is money and energy: the learner's price, power and grid.
PRICES = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)  # $ per GPU-hour
COURSE_PRICE = 2.0  # the course's Lab 5 (GPU Lab here): "At $2/hour"
A100_WATTS = ml.BUDGETS["a100"].watts or 400  # the A100 SXM's TDP, the card this model runs on
# The power control's steps: each card the memory ledger names, at its vendor TDP.
POWERS = tuple(sorted({c.watts for c in ml.BUDGETS.values() if c.watts}))
POWER_CARDS = {w: " / ".join(dict.fromkeys(c.name for c in ml.BUDGETS.values() if c.watts == w)) for w in POWERS}
# kg CO2 per kWh of the grid: an assumption the learner moves. Lifecycle medians (IPCC AR5, 2014):
# coal 0.82, gas 0.49, hydro 0.024, nuclear 0.012. 0.4 is about what LLaMA-2's own estimate implies.
GRIDS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 0.9)
# LLaMA-2 (Touvron et al. 2023, Table 2): A100-80GB GPU-hours, at a 400 W cap, and the paper's CO2.
LLAMA2_70B_GPU_HOURS = 1_720_320
LLAMA2_ALL_GPU_HOURS = 3_311_616
LLAMA2_70B_CO2_T = 291.42
LLAMA2_70B_PARAMS, LLAMA2_TOKENS = 70e9, 2e12  # Table 1: 2.0T pretraining tokens
COURSE_LLAMA = 'GPU Lab (reference): "Training LLaMA-2 70B: ~1M GPU-hours. At $2/hour: $2M in compute costs!"'


def dollars(x: float) -> str:
    """'$114.40', '$1,234', '$3.44M'."""
    if x >= 1e6:
        return f"${x / 1e6:,.2f}M"
    return f"${x:,.0f}" if x >= 1000 else f"${x:,.2f}"


def llama_correction() -> str:
    """The course's LLaMA-2 figure against the paper's, at the course's own price."""
    implied = LLAMA2_70B_CO2_T * 1000 / (LLAMA2_70B_GPU_HOURS * A100_WATTS / 1000)
    return (
        f"The LLaMA-2 paper (Touvron et al. 2023, Table 2) gives {LLAMA2_70B_GPU_HOURS:,} A100-80GB GPU-hours "
        f"for 70B ({LLAMA2_ALL_GPU_HOURS:,} for all four sizes): {dollars(LLAMA2_70B_GPU_HOURS * COURSE_PRICE)} "
        f"at the lab's ${COURSE_PRICE:.0f}, not $2M. Its own estimate, {LLAMA2_70B_CO2_T:g} t CO2 at "
        f"{A100_WATTS} W, implies a grid of {implied:.2f} kg CO2 per kWh."
    )


MONEY_LEVERS = ("price", "power", "grid")
MODEL_LEVERS = ("prefetch", "precision", "checkpointing", "batch", *MONEY_LEVERS)  # meaningless for a measured run
COLOURS = {"data loading": "red", "memory traffic": "yellow", "compute": "green", "copy to device": "yellow"}


def phases(settings: Mapping[str, Any]) -> dict[str, float]:
    """Seconds per iteration for data loading (exposed), memory traffic and compute."""
    tokens = settings["batch"] * SEQ
    compute = 6 * N * tokens / (PEAK["fp32"] * EFFICIENCY)  # the baseline's compute time
    data = compute * BASELINE["data"] / BASELINE["compute"]
    traffic = compute * BASELINE["memory traffic"] / BASELINE["compute"]
    if settings["precision"] == "mixed":
        compute /= PEAK["mixed"] / PEAK["fp32"]
        traffic /= 2
    if settings["checkpointing"]:
        compute *= 8 / 6
        traffic *= 8 / 6
    if settings["prefetch"]:
        data = max(0.0, data / WORKERS - (traffic + compute))
    return {"data loading": data, "memory traffic": traffic, "compute": compute}


class Pipeline(Instrument):
    name = "pipeline"
    title = "Training pipeline"
    summary = "One GPT-2 XL iteration on an A100: data loading, memory traffic, compute, and the MFU they leave"
    controls = (
        Control(
            "profile",
            "Profile",
            "choice",
            ("model", "measured"),
            "model",
            labels=("GPT-2 XL on an A100 (modelled)", "your pipeline-breakdown run (measured)"),
        ),
        Control(
            "prefetch",
            "Prefetching",
            "toggle",
            (False, True),
            False,
            help="DataLoader(num_workers=4, pin_memory=True) and non_blocking copies",
        ),
        Control(
            "precision",
            "Precision",
            "choice",
            ("fp32", "mixed"),
            "fp32",
            labels=("FP32 (TF32 matmuls)", "mixed (FP16/BF16 autocast)"),
        ),
        Control("checkpointing", "Checkpointing", "toggle", (False, True), False),
        Control("batch", "Batch size", "stepper", (1, 2, 4, 8, 16, 32, 64), 4),
        Control(
            "price",
            "Price",
            "stepper",
            PRICES,
            COURSE_PRICE,
            fmt="${:,.2f} per GPU-hour",
            help="what one GPU-hour costs; the GPU Lab's source uses $2",
            affects=("cost_per_billion_tokens", "llama2_70b_cost"),
        ),
        Control(
            "power",
            "Power (TDP)",
            "stepper",
            POWERS,
            A100_WATTS,
            labels=tuple(f"{w} W ({POWER_CARDS[w]})" for w in POWERS),
            fmt="{:,} W",
            help="watts each GPU draws, at its TDP; the model's hours stay an A100's",
            affects=(
                "energy_kwh_per_billion_tokens",
                "co2_kg_per_billion_tokens",
                "llama2_70b_energy_mwh",
                "llama2_70b_co2_t",
            ),
        ),
        Control(
            "grid",
            "Grid CO2",
            "stepper",
            GRIDS,
            0.4,
            fmt="{:g} kg CO2 per kWh (assumed)",
            help="the grid's carbon intensity, an assumption: hydro or nuclear under 0.05, coal about 0.8",
            affects=("co2_kg_per_billion_tokens", "llama2_70b_co2_t"),
        ),
    )
    outputs = {
        "data_share": "share of the iteration waiting for data (0..1)",
        "transfer_share": "share in memory traffic: kernels reading and writing GPU memory, not host copies (0..1)",
        "compute_share": "share computing (0..1)",
        "iteration_seconds": "seconds per iteration (modelled)",
        "mfu": "model FLOPs utilisation (0..1)",
        "tokens_per_second": "training tokens per second",
        "hours_per_billion_tokens": "the Iron Law: 6 N x 1e9 / (peak x MFU), in hours",
        "cost_per_billion_tokens": "$ per billion tokens: hours_per_billion_tokens (GPU-hours) x price",
        "energy_kwh_per_billion_tokens": "kWh per billion tokens: GPUs x TDP x hours = GPU-hours x power / 1000",
        "co2_kg_per_billion_tokens": "kg CO2 per billion tokens: energy x grid",
        "llama2_70b_cost": "$: LLaMA-2 70B's 1,720,320 A100-hours (its paper) x price",
        "llama2_70b_energy_mwh": "MWh: those GPU-hours x power",
        "llama2_70b_co2_t": "t CO2: that energy x grid",
        "memory_bytes": "training memory with Adam (memory-ledger formula, B)",
        "memory_gb": "the same, in GB",
        "fits": "memory fits the A100's 80 GiB",
    }
    outputs_kind = {"fits": bool}

    def needs_context(self, settings: Mapping[str, Any]) -> bool:
        return settings.get("profile") == "measured"

    def compute(self, settings: Mapping[str, Any], context: Context | None = None) -> Reading:
        s = self.settings(settings)
        if s["profile"] == "measured":
            return self._measured((context or Context()).my_pipeline)
        t = phases(s)
        total = sum(t.values())
        tokens = s["batch"] * SEQ
        flops = 6 * N * tokens
        peak = PEAK[s["precision"]]
        mfu = flops / (total * peak)
        mem = ml.ledger(ml.PRESETS["gpt2-xl"], s["precision"], "adam", s["batch"], s["checkpointing"]).total
        fits = mem <= A100_MEMORY
        shares = {k: v / total for k, v in t.items()}
        hours = 6 * N * 1e9 / (peak * mfu) / 3600
        bottleneck = max(shares, key=shares.__getitem__)
        price, watts, grid = s["price"], s["power"], s["grid"]
        cost, kwh = hours * price, hours * watts / 1000
        co2 = kwh * grid
        llama_mwh = LLAMA2_70B_GPU_HOURS * watts / 1e6
        llama_cost, llama_t = LLAMA2_70B_GPU_HOURS * price, llama_mwh * grid  # MWh x kg/kWh = t
        llama_mfu = 6 * LLAMA2_70B_PARAMS * LLAMA2_TOKENS / (LLAMA2_70B_GPU_HOURS * 3600 * PEAK["mixed"])
        outputs = {
            "data_share": shares["data loading"],
            "transfer_share": shares["memory traffic"],
            "compute_share": shares["compute"],
            "iteration_seconds": total,
            "mfu": mfu,
            "tokens_per_second": tokens / total,
            "hours_per_billion_tokens": hours,
            "cost_per_billion_tokens": cost,
            "energy_kwh_per_billion_tokens": kwh,
            "co2_kg_per_billion_tokens": co2,
            "llama2_70b_cost": llama_cost,
            "llama2_70b_energy_mwh": llama_mwh,
            "llama2_70b_co2_t": llama_t,
            "memory_bytes": mem,
            "memory_gb": mem / 1e9,
            "fits": fits,
        }
        verdict = (
            f"MFU {percent(mfu)}: the GPU computes {percent(shares['compute'])} of each "
            f"{total:.2f} s iteration; the largest other phase is {bottleneck}"
            if bottleneck != "compute"
            else f"MFU {percent(mfu)}: compute is now the largest phase ({percent(shares['compute'])} of {total:.2f} s)"
        )
        verdict += f". A billion tokens: {hours:.1f} GPU-hours, {dollars(cost)}, {kwh:,.1f} kWh, {co2:,.1f} kg CO2."
        verdict += "" if fits else f" Memory: {gb(mem)} does not fit the A100's 80 GiB."
        level: Literal["ok", "warning", "error"] = "ok" if fits else "error"
        ckpt = 8 if s["checkpointing"] else 6
        math_lines = (
            f"tokens = batch x s = {s['batch']} x {SEQ} = {tokens:,}",
            f"baseline compute = 6 N tokens / (TF32 156e12 x E {EFFICIENCY}) = "
            f"{6 * N * tokens / (PEAK['fp32'] * EFFICIENCY):.3f} s  (35% of the chapter's baseline)",
            "data = compute x 40/35, memory traffic = compute x 25/35 (the chapter's baseline profile)",
            f"compute now = {ckpt} N tokens / ({PEAK_LABEL[s['precision']]} x {EFFICIENCY}) = {t['compute']:.3f} s",
            "  (TF32 needs torch.backends.cuda.matmul.allow_tf32 = True; PyTorch's default FP32 matmul "
            "runs at 19.5 TFLOP/s, 8x less)"
            if s["precision"] == "fp32"
            else "  (autocast: matmuls in FP16/BF16 on tensor cores)",
            f"memory traffic = {t['memory traffic']:.3f} s"
            + ("  (halved: 16-bit values)" if s["precision"] == "mixed" else ""),
            (
                "data wait = max(0, data / 4 workers - (memory traffic + compute)) = "
                if s["prefetch"]
                else "data wait = data (loaded in the training process) = "
            )
            + f"{t['data loading']:.3f} s",
            f"MFU = 6 N tokens / (iteration {total:.3f} s x peak) = {percent(mfu)}",
            f"Iron Law: T = 6 N D / (peak x MFU) = {hours:.1f} h per billion tokens on one A100",
            f"cost   = GPU-hours x price = {hours:.1f} h x ${price:,.2f} = {dollars(cost)} per billion tokens",
            f"energy = GPUs x TDP x hours = 1 x {watts} W x {hours:.1f} h = {kwh:,.1f} kWh",
            "  (each GPU at its TDP the whole run: an upper bound for the GPUs; host, network, cooling not counted)",
            f"CO2    = energy x grid = {kwh:,.1f} kWh x {grid:g} kg/kWh (assumed) = {co2:,.1f} kg",
            "  (over G GPUs at this MFU the run takes T / G: the GPU-hours, cost and energy stay)",
            f"LLaMA-2 70B: {LLAMA2_70B_GPU_HOURS:,} A100-hours x ${price:,.2f} = {dollars(llama_cost)}; "
            f"x {watts} W = {llama_mwh:,.0f} MWh; x {grid:g} = {llama_t:,.0f} t CO2",
            f"  its MFU = 6 x 70e9 x 2e12 tokens / ({LLAMA2_70B_GPU_HOURS:,} h x 3600 s x 312e12) = {percent(llama_mfu)}",
            f"memory (Adam, memory-ledger formula) = {gb(mem)}",
        )
        bars = (Bar("this setup", tuple(Segment(k, v, COLOURS[k]) for k, v in shares.items())), *CHAPTER_BARS)
        figures = (
            ("iteration", f"{total:.3f} s, {tokens / total:,.0f} tokens/s"),
            ("memory", f"{gb(mem)} with Adam" + ("" if fits else "  (over 80 GiB)")),
            ("1B tokens", f"{hours:.1f} GPU-h x ${price:,.2f} = {dollars(cost)}; {kwh:,.1f} kWh, {co2:,.1f} kg CO2"),
            (
                "LLaMA-2 70B",
                f"{LLAMA2_70B_GPU_HOURS:,} GPU-h x ${price:,.2f} = {dollars(llama_cost)}; "
                f"{llama_mwh:,.0f} MWh, {llama_t:,.0f} t CO2",
            ),
        )
        notes = [
            chapter_marks_note(),
            "Batch size scales every phase alike here (for a model this size), so it moves memory and "
            "the time per iteration, not the shares or the MFU.",
            "The chapter gives only 5% data loading and 75% compute for its optimised run; the bar "
            'draws the remaining 20% as memory traffic (the chapter\'s "transfers").',
        ]
        if watts != A100_WATTS:
            notes.append(
                f"Power {watts} W is not the A100's {A100_WATTS} W: the hours are still an A100's (its peak, this "
                "MFU), so this is their energy at that power; another card would also take other hours."
            )
        return Reading(
            outputs=outputs,
            chart=Chart("share", bars),
            verdict=verdict,
            level=level,
            figures=figures,
            gauge=Gauge("MFU", mfu, CHAPTER_MARKS),
            math=math_lines,
            reference=(*CHAPTER, CORRECTION, COURSE_LLAMA, llama_correction()),
            notes=tuple(notes),
        )

    def _measured(self, run: dict[str, Any] | None) -> Reading:
        if not run or not isinstance(run.get("mfu"), (int, float)) or isinstance(run.get("mfu"), bool):
            return Reading(
                ignored=MODEL_LEVERS,
                outputs={k: None for k in self.outputs},
                chart=Chart("share", ()),
                level="warning",
                verdict=(
                    "No pipeline-breakdown run yet: run it (the lesson's run step, or "
                    "`gpututor run pipeline-breakdown`) and its phases appear here."
                ),
            )
        data = _num(run.get("data_wait_share"))
        copy = _num(run.get("copy_share"))
        comp = sum(_num(run.get(k)) for k in ("forward_share", "backward_share", "optimizer_share"))
        mfu = _num(run.get("mfu"))
        outputs: dict[str, float | None] = {k: None for k in self.outputs}
        outputs.update(data_share=data, transfer_share=copy, compute_share=comp, mfu=mfu)
        how = (
            f"{run.get('model', '?')} model, batch {run.get('batch_size', '?')}, {run.get('dtype', '?')}, "
            f"data {run.get('data_path', '?')}"
        )
        return Reading(
            outputs=outputs,
            chart=Chart(
                "share",
                (
                    Bar(
                        "measured",
                        (
                            Segment("data loading", data, COLOURS["data loading"]),
                            Segment("copy to device", copy, COLOURS["copy to device"]),
                            Segment("compute", comp, COLOURS["compute"]),
                        ),
                    ),
                    *CHAPTER_BARS,
                ),
            ),
            verdict=(
                f"Measured on {run.get('device_name') or 'your device'}: MFU {mfu:.2%} "
                f"against a peak of {_num(run.get('peak_tflops')):.3g} TFLOP/s, {_peak_said(run)} ({how})."
            ),
            level="ok",
            gauge=Gauge("MFU", mfu, CHAPTER_MARKS),
            math=(
                f"MFU = achieved {_num(run.get('achieved_tflops')):.3g} TFLOP/s / peak "
                f"{_num(run.get('peak_tflops')):.3g} TFLOP/s ({run.get('peak_source', '?')})",
                "compute = forward + backward + optimizer step; copy to device = host-to-device copies "
                "(the model's memory traffic, kernels reading and writing GPU memory, is inside compute here)",
            ),
            notes=(
                chapter_marks_note(),
                "The other levers model GPT-2 XL; to change your own run, switch its settings on the run "
                "step and run it again.",
            ),
            ignored=MODEL_LEVERS,
        )


def _peak_said(run: dict[str, Any]) -> str:
    """Which peak the MFU is against, and on a GPU with a spec, the share of the measured one too."""
    source = run.get("peak_source")
    measured, share = _num(run.get("peak_measured_tflops")), _num(run.get("mfu_vs_measured"))
    if source == "vendor spec":
        said = "the vendor's spec"
        if measured > 0 and share > 0:
            said += f"; {share:.2%} of the {measured:.3g} TFLOP/s its matmuls reached when measured here"
        return said
    if source == "measured matmul":
        threads = run.get("peak_threads")
        n = threads if isinstance(threads, int) and not isinstance(threads, bool) and 0 < threads < 10**6 else None
        return "this device's peak, measured with matmuls" + (
            f" with the {n} thread{'s' if n != 1 else ''} training used" if n else ""
        )
    return f"from {source}" if isinstance(source, str) and source else "from an unknown source"


def _num(value: Any) -> float:
    """A stored metric as a float; anything else (missing, text from an old run) as 0."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0
