"""`amp-benchmark`: CPU vs GPU float32 vs TF32 vs mixed precision, end to end.

One MNIST MLP wide enough for matmul precision to matter (Flatten, Linear(784, width), ReLU,
(layers - 1) x [Linear(width, width), ReLU], Linear(width, 10)), Adam and cross-entropy on
resident tensors, trained in up to four cases:

    cpu   float32 on the CPU, on the first `cpu_samples` images; its seconds per epoch are
          projected to the full epoch: measured seconds x epoch images / cpu_samples
    fp32  float32 on the accelerator with TF32 off (torch.backends.cuda.matmul.allow_tf32
          and torch.backends.cudnn.allow_tf32 = False)
    tf32  the same with TF32 on (CUDA, compute capability 8.0+ only)
    amp   torch.autocast with the course's settings (training.autocast_settings("auto")):
          float16 + GradScaler on CUDA, bfloat16 on a CPU-only machine (projected like cpu)

Every case starts from the same initial weights and sees its batches in the same order (a
generator seeded with `seed`). Each first runs untimed warm-up steps on a throwaway copy
(training.warm_up), then `epochs` timed epochs; seconds per epoch are device-synchronised
medians, evaluation excluded. Peak memory (CUDA only) is max_memory_allocated above what
was allocated when the case's timed epochs started. The TF32 settings found at the start are
put back at the end, whatever happens.

amp_speedup's noise: the cases train in turns, an epoch each, so the k-th epochs of float32 and
autocast ran side by side; amp_speedup is the median of those paired ratios and
amp_speedup_low/high its interval (measurement.intervals; the CPU cases' epochs projected like
their medians), None with epochs=1 (nothing repeated) or where amp_speedup is None.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
from torch import nn

from tutor.charts import bars
from tutor.experiments import devices
from tutor.experiments.devices import Device
from tutor.experiments.events import Epoch, Event, Finished, Note, Started, Table
from tutor.experiments.model import count_parameters, linear_stack
from tutor.experiments.specs.amp_benchmark import AmpBenchmarkParams
from tutor.experiments.training import (
    OFF,
    Amp,
    Fit,
    autocast_settings,
    cpu_budget_s,
    fit_samples,
    saved_for_backward,
    seconds_per_sample,
    seed_everything,
    shell_try,
    train_timed,
)
from tutor.measurement.intervals import bounds, in_words, median_interval
from tutor.measurement.timing import paired_ratios
from tutor.present import seconds


def benchmark_mlp(width: int, layers: int) -> nn.Sequential:
    """784 -> width, (layers - 1) x width -> width, width -> 10, ReLU between."""
    return nn.Sequential(
        nn.Flatten(), nn.Linear(28 * 28, width), nn.ReLU(), *linear_stack(width, layers - 1), nn.Linear(width, 10)
    )


def _tf32_settings() -> tuple[str, bool]:
    """What to restore: float32 matmul precision ('highest' = TF32 off) and cuDNN's TF32 switch."""
    return torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32


def _restore_tf32(saved: tuple[str, bool]) -> None:
    torch.set_float32_matmul_precision(saved[0])
    torch.backends.cudnn.allow_tf32 = saved[1]


def _set_tf32(on: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def _train_case(
    label: str, amp: Amp, init_state: dict, x, y, test_x, test_y, device: str, p: AmpBenchmarkParams
) -> Iterator[Event | dict]:
    """Train one case from `init_state`; yields Step/Epoch events, then train_timed's result dict."""
    seed_everything(p.seed)
    model = benchmark_mlp(p.width, p.layers).to(device)
    model.load_state_dict(init_state)  # the same starting weights in every case
    for item in train_timed(
        model,
        x,
        y,
        test_x,
        test_y,
        device,
        epochs=p.epochs,
        batch_size=p.batch_size,
        lr=p.lr,
        seed=p.seed,
        amp=amp,
        label=label,
    ):
        if isinstance(item, dict):
            item["images"] = x.shape[0]  # the images this case trained on per epoch
        yield item


@dataclass
class _Turn:
    """One case training in turns with the others: its epochs so far, and its projection factor."""

    name: str
    events: Iterator[Event | dict]
    factor: float
    epochs: list[float] = field(default_factory=list)


def _in_turns(turns: list[_Turn], before: Callable[[str], None]) -> Iterator[tuple[_Turn, Event | dict]]:
    """Each case's events up to and including its next Epoch, case after case, until all are done;
    `before(name)` runs as a case resumes (on CUDA: its TF32 setting, which is global)."""
    active = list(turns)
    while active:
        for turn in list(active):
            before(turn.name)
            for item in turn.events:
                yield turn, item
                if isinstance(item, Epoch):
                    break
            else:
                active.remove(turn)


def _activation_mb(p: AmpBenchmarkParams, device: str) -> float:
    """MB a float32 forward of one batch keeps for backward (parameters excluded)."""
    model = benchmark_mlp(p.width, p.layers).to(device)
    x = torch.zeros(p.batch_size, 1, 28, 28, device=device)
    with saved_for_backward(model) as saved:
        model(x).sum()
    return sum(saved.values()) / 1e6


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def measure(p: AmpBenchmarkParams, dev: Device) -> Iterator[Event]:
    from tutor.experiments import data as mnist

    device = dev.torch_device
    accel = dev.is_accelerator
    amp = autocast_settings("auto", dev)
    cpu_dev = next(d for d in devices.available() if d.kind == "cpu")
    bigger = shell_try("amp-benchmark", p, width=p.width * 4)  # said where a small model explains a result

    # The CPU cases train on the first cpu_samples images of the same (CPU) tensors.
    cpu_data = mnist.load("cpu", train_samples=p.train_samples, test_samples=p.test_samples)
    epoch_images = cpu_data.train_x.shape[0]
    n_cpu = min(p.cpu_samples, epoch_images)
    projection = epoch_images / n_cpu  # CPU time scales with the number of steps
    cpu_x, cpu_y = cpu_data.train_x[:n_cpu], cpu_data.train_y[:n_cpu]
    n_test = cpu_data.test_x.shape[0]

    seed_everything(p.seed)
    model0 = benchmark_mlp(p.width, p.layers)
    params = count_parameters(model0)
    init_state = copy.deepcopy(model0.state_dict())
    del model0

    tf32_ok = dev.kind == "cuda" and dev.capability is not None and dev.capability >= (8, 0)
    names = ["cpu", "fp32", "tf32", "amp"] if accel else ["cpu", "amp"]
    if not tf32_ok and "tf32" in names:
        names.remove("tf32")
    if not amp.enabled:
        names.remove("amp")

    yield Started(
        "amp-benchmark",
        device,
        dev.name,
        cpu_data.description,
        detail=(
            f"MLP 784-{p.width}x{p.layers}-10 ({params:,} parameters); batch {p.batch_size}, "
            f"{p.epochs} epoch(s); cases: {', '.join(names)}"
        ),
    )
    yield Note(f"Device: {dev.describe()}." + ("" if dev.kind == "cpu" else f" CPU baseline: {cpu_dev.describe()}."))
    if cpu_data.fallback_reason:
        yield Note(f"Data: {cpu_data.description}.", "warning")
    if not accel:
        other = devices.accelerator()
        where = (
            f"Running on the CPU as asked; this machine also has {other.describe()}: run with "
            f"device={other.torch_device} for the GPU cases."
            if other
            else "No GPU here (no CUDA or Apple MPS device), so there is nothing to compare the CPU with."
        )
        yield Note(
            f"{where} The GPU float32 and TF32 cases, and the GPU's speedup over the CPU, need a GPU: they "
            "show as n/a. On a CUDA GPU this run adds: the same training in float32 on the GPU (TF32 off), with TF32 matmuls (compute "
            "capability 8.0+), and with float16 autocast + GradScaler, each timed over the full epoch, with "
            "peak memory. No GPU numbers are made up here: this run measures the CPU in float32 and with "
            "bfloat16 autocast.",
            "warning",
        )
    if n_cpu < epoch_images:
        yield Note(
            f"The CPU case{'s train' if not accel else ' trains'} on the first {n_cpu} of {epoch_images} images "
            f"to keep the run short; seconds per epoch are projected to {epoch_images} images: measured seconds "
            f"x {epoch_images} / {n_cpu} (= x {projection:.2f}). Marked * in the table."
        )
    if amp.enabled:
        yield Note(
            f"Mixed precision uses the course's setting, amp=auto. {amp.note}"
            + (
                " bfloat16 would also work on this GPU, without a GradScaler (amp-compare with amp=bf16 shows it)."
                if dev.kind == "cuda" and dev.bf16 and amp.dtype == torch.float16
                else ""
            ),
            "warning" if amp.emulated else "info",
        )
    else:
        yield Note(amp.note or "Mixed precision is not available on this device.", "warning")
    if dev.kind == "cuda" and not tf32_ok:
        cap = f"sm_{dev.capability[0]}{dev.capability[1]}" if dev.capability else "unknown"
        yield Note(f"No tf32 case: TF32 needs an Ampere (compute capability 8.0) or newer GPU; {dev.name} is {cap}.")
    elif dev.kind == "mps":
        yield Note(
            "No tf32 case: TF32 is a format of NVIDIA's tensor cores (CUDA, compute capability 8.0+), not of MPS."
        )
    if dev.kind == "cuda":
        data_mb = (
            sum(
                t.numel() * t.element_size()
                for t in (cpu_data.train_x, cpu_data.train_y, cpu_data.test_x, cpu_data.test_y)
            )
            / 1e6
        )
        yield Note(
            "Peak MB is the peak above what was allocated when each case's timed epochs started: the train and "
            f"test tensors ({data_mb:.1f} MB), the model's float32 weights and a copy of the initial weights "
            f"({params * 4 / 1e6:.1f} MB each). What is left is what training adds: gradients and Adam's two "
            f"moments (parameters x 12 bytes = {params * 12 / 1e6:.1f} MB in every case), activations, and under "
            "autocast its cached float16 copies of the weights."
        )
    elif accel:
        yield Note(
            f"Peak memory is reported only on CUDA (torch.cuda.max_memory_allocated); on {dev.kind} "
            "PyTorch keeps no per-run peak, so the memory column shows n/a."
        )

    results: dict[str, dict] = {}
    cut_to: dict[str, int] = {}  # images each CPU case timed
    turns: list[_Turn] = []
    saved_tf32 = _tf32_settings()
    try:
        d = mnist.load(device, train_samples=p.train_samples, test_samples=p.test_samples) if accel else None
        for name in names:
            on_cpu = name == "cpu" or not accel
            case_amp = OFF if name in ("cpu", "fp32", "tf32") else amp
            if dev.kind == "cuda":
                _set_tf32(name == "tf32")  # TF32 off (PyTorch's matmul default) everywhere but the tf32 case
            what = {
                "cpu": "float32 on the CPU",
                "fp32": f"float32 on {device}, TF32 off",
                "tf32": f"float32 with TF32 matmuls on {device}",
                "amp": f"autocast {amp.dtype_name} on {'the CPU' if on_cpu else device}",
            }[name]
            used = n_cpu
            if on_cpu:
                # Sized by what this CPU measures: an emulated bfloat16 case can be 100x slower than
                # float32, and the step must still end within a minute.
                per = seconds_per_sample(
                    lambda: benchmark_mlp(p.width, p.layers), cpu_x, cpu_y, "cpu", batch_size=p.batch_size, amp=case_amp
                )
                share = cpu_budget_s() / sum(1 for n in names if n == "cpu" or not accel) / p.epochs
                fit = fit_samples(epoch_images, per, share, batch_size=p.batch_size, minimum_batches=2)
                used = min(fit.used, n_cpu)
                if used < n_cpu:
                    why = (
                        f": {amp.dtype_name} is emulated on this CPU"
                        if case_amp.enabled and amp.emulated
                        else " to keep this step within a minute"
                    )
                    yield Note(Fit(epoch_images, used, per, share).note(f"Case {name}", why), "warning")
                cut_to[name] = used
            yield Note(f"Case {name}: {what}, {used if on_cpu else epoch_images} images per epoch ...")
            if on_cpu:
                x, y, tx, ty = cpu_x[:used], cpu_y[:used], cpu_data.test_x, cpu_data.test_y
            else:
                assert d is not None  # loaded whenever accel, and a case runs off the CPU only then
                x, y, tx, ty = d.train_x, d.train_y, d.test_x, d.test_y
            target = "cpu" if on_cpu else device
            state = {k: v.to(target) for k, v in init_state.items()}
            factor = epoch_images / used if on_cpu else 1.0  # the CPU cases' time, projected to the full epoch
            turns.append(_Turn(name, _train_case(name, case_amp, state, x, y, tx, ty, target, p), factor))
        if len(turns) > 1:
            yield Note(
                f"The cases now train in turns, one epoch each ({', '.join(t.name for t in turns)}, then "
                "again), so a slow moment of the machine falls on all of them."
            )
        # The cases take turns, an epoch each (cpu, amp, cpu, amp, ...), so a slow moment of the
        # machine falls on every case, and the k-th epochs of two cases ran side by side: their
        # ratio is paired. Run one after the other, 5 runs on this 2-core CPU gave amp_speedup
        # medians from 1.35x to 1.88x with each run's interval far narrower (bench/verdict_study.py).
        for turn, item in _in_turns(turns, lambda name: _set_tf32(name == "tf32") if dev.kind == "cuda" else None):
            if isinstance(item, dict):
                item["epoch_seconds"] = item["seconds"] * turn.factor
                item["every_epoch_seconds"] = [e * turn.factor for e in turn.epochs]
                item["projected"] = turn.factor != 1.0
                results[turn.name] = item
            else:
                if isinstance(item, Epoch):
                    turn.epochs.append(item.seconds)
                yield item
        act_mb = _activation_mb(p, device) if dev.kind == "cuda" else None
    finally:
        _restore_tf32(saved_tf32)

    def get(name: str, key: str):
        return results[name][key] if name in results else None

    cpu_s = get("cpu", "epoch_seconds")
    fp32_s, tf32_s, amp_s = get("fp32", "epoch_seconds"), get("tf32", "epoch_seconds"), get("amp", "epoch_seconds")
    amp_base_s = fp32_s if accel else cpu_s  # float32 on the same device as autocast
    gpu_speedup = _ratio(cpu_s, fp32_s)
    tf32_speedup = _ratio(fp32_s, tf32_s)
    amp_speedup = _ratio(amp_base_s, amp_s)
    amp_base = "fp32" if accel else "cpu"
    interval = (
        median_interval(paired_ratios(results[amp_base]["every_epoch_seconds"], results["amp"]["every_epoch_seconds"]))
        if amp_speedup is not None
        else None
    )
    if interval is not None:
        amp_speedup = interval.median  # the typical paired epoch's
    amp_speedup_low, amp_speedup_high = bounds(interval)
    best_case = min(results, key=lambda k: results[k]["epoch_seconds"])
    best_speedup = _ratio(cpu_s, results[best_case]["epoch_seconds"])

    def mb(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.1f}"

    label = {
        "cpu": "float32",
        "fp32": f"{dev.kind} float32",
        "tf32": f"{dev.kind} TF32",
        "amp": f"{dev.kind} {amp.dtype_name}" + ("+scaler" if amp.use_scaler else ""),
    }
    rows = []
    for name, r in results.items():
        star = "*" if r["projected"] else ""
        rows.append(
            [
                f"{name} ({label[name]})",
                seconds(r["epoch_seconds"]) + star,
                f"{cpu_s / r['epoch_seconds']:.2f}x",
                f"{r['accuracy']:.2%}",
                mb(r["peak_mb"]),
            ]
        )
    title = f"Seconds per epoch of {epoch_images} images (median)"
    any_projected = any(r["projected"] for r in results.values())
    if any_projected:
        timed = sorted(set(cut_to.values()))
        title += (
            f"; * projected from {timed[0]}"
            if len(timed) == 1
            else "; * projected from " + ", ".join(f"{v} ({k})" for k, v in cut_to.items())
        )
    yield Table(title, ["case", "s/epoch", "vs CPU", "test acc", "peak MB"], rows)
    # The course's optional chart: the same seconds per epoch as bars, so the gaps read at a glance.
    yield Note(
        bars(
            [
                (
                    "cpu float32" if name == "cpu" else label[name],
                    r["epoch_seconds"],
                    seconds(r["epoch_seconds"]) + ("*" if r["projected"] else ""),
                )
                for name, r in results.items()
            ],
            unit="time per epoch (shorter is faster" + ("; * projected)" if any_projected else ")"),
        ),
        "figure",
    )
    if len(set(cut_to.values())) > 1:
        yield Note(
            "The CPU cases trained on different numbers of images ("
            + ", ".join(f"{k} {v:,}" for k, v in cut_to.items())
            + "), each sized to its own speed: their s/epoch compare, their accuracies do not."
        )

    # ---- what the numbers say
    if gpu_speedup is not None:
        projected = (
            f" (the CPU time projected from {cut_to.get('cpu', n_cpu)} images)" if results["cpu"]["projected"] else ""
        )
        if gpu_speedup >= 1:
            yield Note(
                f"The GPU in float32 (TF32 off) trained {gpu_speedup:.1f}x faster than the CPU{projected}.", "result"
            )
        else:
            yield Note(
                f"The GPU in float32 was {1 / gpu_speedup:.1f}x SLOWER than the CPU{projected}: a model this small "
                "gives each kernel too little work to hide its launch cost. Try a larger width or batch_size"
                + (bigger or "")
                + ".",
                "result",
            )
    if tf32_speedup is not None:
        if tf32_speedup > 1.05:
            yield Note(
                f"TF32 made the float32 training {tf32_speedup:.2f}x faster. TF32 keeps float32's 8-bit exponent "
                "(its range) but rounds the mantissa to 10 bits inside the tensor cores' matmuls; the weights, "
                "gradients and everything outside matmuls stay float32. One line turns it on: "
                "torch.backends.cuda.matmul.allow_tf32 = True (or torch.set_float32_matmul_precision('high')).",
                "result",
            )
        else:
            yield Note(
                f"TF32 did not help here ({tf32_speedup:.2f}x): at batch {p.batch_size} and width {p.width} each "
                "step is short enough that kernel launches, the optimizer step and memory traffic, not matmul "
                "arithmetic, set the pace. Try a larger width or batch_size" + (bigger or "") + ".",
                "result",
            )
    if amp_speedup is not None:
        base_name = "float32 on the GPU" if accel else "float32 on the CPU"
        if amp_speedup < 1:
            reasons = [f"Mixed precision was {1 / amp_speedup:.2f}x SLOWER than {base_name}: a real result, not a bug."]
            if amp.emulated:
                reasons.append(
                    f"{cpu_dev.name} has no fast {amp.dtype_name} path, so its {amp.dtype_name} matmuls are "
                    "emulated (converted around float32 arithmetic): slower, never faster."
                )
            reasons.append(
                f"autocast adds work every step (casting weights and activations to {amp.dtype_name})"
                + (" and GradScaler adds its scale, unscale and inf/NaN checks" if amp.use_scaler else "")
                + ", which only pays off when the matmuls are large: try a larger width or batch_size"
                + (bigger or "")
                + "."
            )
            yield Note(" ".join(reasons), "result")
        elif amp.emulated:
            yield Note(
                f"Mixed precision measured {amp_speedup:.2f}x faster, which this CPU's emulated {amp.dtype_name} does "
                "not explain: most likely noise (other programs sharing the CPU). Try more cpu_samples or epochs.",
                "warning",
            )
        else:
            where = (
                (" on tensor cores" if dev.tensor_cores else "")
                if accel
                else (
                    " with the CPU's native bfloat16 instructions (AVX512-BF16 / AMX on x86, BF16 on ARM)"
                    if dev.bf16
                    else ""
                )
            )
            yield Note(
                f"Mixed precision was {amp_speedup:.2f}x faster than {base_name}: the matmuls ran in "
                f"{amp.dtype_name}{where}, moving half the bytes of float32, while the weights and the optimizer "
                "step stayed float32.",
                "result",
            )
        if amp_speedup_low is not None and interval is not None:  # (bounds() is None, None without an interval)
            yield Note(
                f"The noise: the speedup is {in_words(interval, lambda v: f'{v:.2f}x', 'paired epochs')} (the "
                "cases took turns, an epoch each, so each pair of epochs ran side by side)."
            )
        if tf32_s is not None and amp_s is not None:
            yield Note(
                f"Against TF32, mixed precision was {tf32_s / amp_s:.2f}x "
                f"{'faster' if amp_s < tf32_s else 'slower (or no faster)'}: TF32 already runs float32 matmuls on "
                "tensor cores, so what float16 adds is half the memory traffic, at the price of its casts"
                + (" and loss scaling." if amp.use_scaler else "."),
                "result",
            )
    accel_times = [r["seconds"] for k, r in results.items() if accel and k != "cpu"]
    if accel_times and min(accel_times) < 0.5:
        yield Note(
            "The GPU epochs took under half a second, so a few milliseconds of noise move the ratios; "
            "epochs=3 (the median is reported) or more images give steadier figures."
        )
    if not accel and results and min(r["seconds"] for r in results.values()) < 0.5:
        yield Note("These CPU runs took under half a second, so noise moves the ratio; more cpu_samples help.")

    # Accuracy: compare only the cases that trained on the same images.
    groups: dict[int, list[str]] = {}
    for name, r in results.items():
        groups.setdefault(r["images"], []).append(name)
    for images, members in groups.items():
        if len(members) < 2:
            continue
        ref = results[members[0]]["accuracy"]
        noise = 2 * math.sqrt(max(ref * (1 - ref), 1e-12) / n_test)
        spread = max(results[k]["accuracy"] for k in members) - min(results[k]["accuracy"] for k in members)
        accs = ", ".join(f"{k} {results[k]['accuracy']:.2%}" for k in members)
        verdict = (
            "within the noise: the same seed, weights and batches, only rounding differs"
            + (", and autocast keeps float32 master weights" if "amp" in members else "")
            if spread <= noise
            else "more than the test set's noise: rounding changed the training path enough to matter here"
        )
        yield Note(
            f"Accuracy after {images} images: {accs}. The spread ({spread * 100:.2f} points) is {verdict} "
            f"(noise = 2 x sqrt(p(1-p)/n) = {noise * 100:.2f} points for p = {ref:.2%}, n = {n_test} test images).",
            "result",
        )
    if accel and "cpu" in results and results["cpu"]["projected"]:
        yield Note(
            f"The CPU case's accuracy is after only {n_cpu} images, so it is not comparable with the GPU cases'."
        )

    fp32_peak, tf32_peak, amp_peak = get("fp32", "peak_mb"), get("tf32", "peak_mb"), get("amp", "peak_mb")
    if fp32_peak is not None and amp_peak is not None:
        cache_mb = params * 2 / 1e6
        more = amp_peak > fp32_peak
        yield Note(
            f"Peak memory: float32 {fp32_peak:.1f} MB, mixed precision {amp_peak:.1f} MB: mixed precision used "
            + (f"MORE ({amp_peak - fp32_peak:+.1f} MB). " if more else f"less ({amp_peak - fp32_peak:+.1f} MB). ")
            + f"Autocast halves the activations (a float32 forward keeps {act_mb:.1f} MB at batch {p.batch_size}), "
            f"but the float16 copies of the weights it casts live through forward and backward (parameters x 2 "
            f"bytes = {cache_mb:.1f} MB), "
            "and weights, gradients and Adam's moments stay float32. With small activations and many weights "
            "the cache wins; with big batches and activations mixed precision saves memory.",
            "result",
        )
    if tf32_peak is not None and fp32_peak is not None:
        yield Note(
            f"TF32 changes no tensor's dtype, so its memory matches float32: {tf32_peak:.1f} MB vs {fp32_peak:.1f} MB."
        )

    yield Finished(
        {
            "cpu_seconds": cpu_s,
            "fp32_seconds": fp32_s,
            "tf32_seconds": tf32_s,
            "amp_seconds": amp_s,
            "gpu_speedup": gpu_speedup,
            "tf32_speedup": tf32_speedup,
            "amp_speedup": amp_speedup,
            "amp_speedup_low": amp_speedup_low,
            "amp_speedup_high": amp_speedup_high,
            "best_speedup": best_speedup,
            "best_case": best_case,
            "cpu_accuracy": get("cpu", "accuracy"),
            "fp32_accuracy": get("fp32", "accuracy"),
            "tf32_accuracy": get("tf32", "accuracy"),
            "amp_accuracy": get("amp", "accuracy"),
            "fp32_peak_mb": fp32_peak,
            "tf32_peak_mb": tf32_peak,
            "amp_peak_mb": amp_peak,
            "amp_dtype": amp.dtype_name,
            "cpu_images_timed": cut_to.get("cpu"),  # of epoch_images: the CPU cases' times are projected
            "amp_images_timed": cut_to.get("amp"),
            "parameters": params,
            "accelerator": dev.name if accel else "none",
            "device": device,
        }
    )
