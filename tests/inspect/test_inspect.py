"""`gpututor inspect`: each planted mistake found, none on the clean script, FLOPs and MFU against
a hand count, the step-time split summing to the step, and bad scripts named plainly. Short
windows (a few steps) keep each run to a few seconds."""

from __future__ import annotations

import json
import math
import os
import textwrap
from pathlib import Path

import pytest

from tutor.cli import main
from tutor.inspect import findings, launch

SCRIPTS = Path(__file__).resolve().parents[1] / "inspect_scripts"
EXAMPLES = Path(launch.__file__).resolve().parent / "examples"  # the scripts the package ships
SMALL = SCRIPTS / "small_train.py"
WARMUP, STEPS = 2, 6


def inspect(script: Path, args: list[str], timeout: float = 60, gpu: bool = False, **kw) -> findings.Report:
    """The script watched; on a CUDA machine with CUDA hidden from it unless `gpu`, so what these
    tests expect of a machine with no accelerator holds on a GPU box too (the @gpu tests ask for it)."""
    hidden = None if gpu else os.environ.get("CUDA_VISIBLE_DEVICES", "unset")
    if not gpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    try:
        ran = launch.run_script(script, args, warmup=WARMUP, steps=STEPS, timeout=timeout, **kw)
    finally:
        if hidden == "unset":
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        elif hidden is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = hidden
    return findings.build(script, args, ran, timeout)


@pytest.fixture(scope="module")
def small_runs() -> dict[str, findings.Report]:
    mistakes = ["none", "item", "keep-losses", "no-zero-grad", "cpu-model", "slow-data"]
    return {m: inspect(SMALL, ["--mistake", m]) for m in mistakes}


def keys(report: findings.Report) -> set[str]:
    return {f.key for f in report.findings}


def small_mlp_flops(batch: int) -> int:
    """By hand: a matmul (m x k)(k x n) is 2mkn. Forward: every layer. Backward: every weight's
    gradient (the forward's count again) and every layer's input gradient but the first's."""
    layers = [(784, 512), (512, 512), (512, 10)]
    forward = sum(2 * batch * i * o for i, o in layers)
    input_grads = sum(2 * batch * i * o for i, o in layers[1:])
    return 2 * forward + input_grads


def test_the_clean_script_is_watched_and_stopped_with_no_finding(small_runs):
    report = small_runs["none"]
    assert report.ok, report.problem
    assert report.outcome == "stopped" and "stopped on purpose" in (report.stopped_note or "")
    assert report.steps_timed == STEPS and report.steps_done == WARMUP + 1 + STEPS
    assert report.findings == []


@pytest.mark.parametrize(
    "mistake,key",
    [
        ("item", "sync-per-step"),
        ("keep-losses", "losses-kept"),
        ("no-zero-grad", "no-zero-grad"),
        ("slow-data", "data-wait"),
    ],
)
def test_each_planted_mistake_is_found_alone(small_runs, mistake, key):
    report = small_runs[mistake]
    assert report.ok, report.problem
    assert keys(report) == {key}, [f.evidence for f in report.findings]
    found = report.findings[0]
    assert found.evidence and ":" in found.lesson


def test_a_model_left_on_the_cpu_is_no_finding_where_there_is_no_accelerator(small_runs):
    import torch

    if torch.cuda.is_available():
        pytest.skip("an accelerator is here: test_cpu_model_on_a_gpu_machine covers it")
    # nothing of the model's place; the loader's share can cross data-wait's bar on a loaded machine
    assert keys(small_runs["cpu-model"]) <= {"data-wait"}


@pytest.mark.gpu
def test_cpu_model_on_a_gpu_machine():
    report = inspect(SMALL, ["--mistake", "cpu-model"], gpu=True)
    assert "model-on-cpu" in keys(report)
    clean = inspect(SMALL, [], gpu=True)
    assert "model-on-cpu" not in keys(clean) and clean.split_how.startswith("GPU")


@pytest.mark.gpu
@pytest.mark.parametrize(
    "args,key",
    [
        ([], "no-autocast"),  # float32 on a GPU with fast 16-bit matmuls
        (["--mistake", "clock"], "timing-no-sync"),
        (["--mistake", "save-on-gpu"], "checkpoint-on-device"),
    ],
)
def test_the_gpu_only_findings_on_a_gpu(args, key):
    report = inspect(SMALL, args, gpu=True)
    assert report.ok and key in keys(report), (report.problem, [f.evidence for f in report.findings])
    amp = inspect(SMALL, [*args, "--amp"], gpu=True)
    assert "no-autocast" not in keys(amp)
    if key != "no-autocast":
        assert key in keys(amp)  # the planted mistake, with autocast on as well


def test_flops_match_the_hand_count_and_mfu_follows_from_them(small_runs):
    report = small_runs["none"]
    hand = small_mlp_flops(batch=64)
    assert report.flops_per_step == pytest.approx(hand, rel=0.05)
    assert report.roof_tflops, report.mfu_how
    assert report.steps_per_s is not None and report.mfu is not None
    by_hand = hand * report.steps_per_s / (report.roof_tflops * 1e12)
    assert report.mfu == pytest.approx(by_hand, rel=0.05)
    assert report.roof_dtype == "float32"


def test_the_split_sums_to_the_step(small_runs):
    for report in small_runs.values():
        parts = {p.name: p.seconds for p in report.split}
        assert all(v >= 0 for v in parts.values())
        assert parts["forward"] > 0 and parts["backward"] > 0 and parts["optimizer"] > 0
        assert math.isclose(sum(p.share for p in report.split), 1.0, rel_tol=1e-6)
    slow = {p.name: p.share for p in small_runs["slow-data"].split}
    clean = {p.name: p.share for p in small_runs["none"].split}
    assert slow["data"] > 2 * clean["data"]


def test_memory_parts_beside_the_ledger(small_runs):
    report = small_runs["none"]
    parts = {p.name: p for p in report.memory}
    params = 784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10
    assert parts["weights"].measured_bytes == parts["weights"].formula_bytes == params * 4
    assert parts["gradients"].measured_bytes == params * 4
    assert parts["optimizer state"].measured_bytes == parts["optimizer state"].formula_bytes == params * 4  # momentum
    # saved for backward: the batch, two ReLU outputs, log-softmax and the labels, at the least
    assert parts["activations"].measured_bytes >= 64 * 784 * 4 + 2 * 64 * 512 * 4
    assert report.peak_bytes and report.peak_bytes >= sum(p.measured_bytes or 0 for p in report.memory)


def mnist_cnn_flops(batch: int) -> int:
    conv1 = 2 * batch * 32 * 26 * 26 * 1 * 9  # the first layer: no input gradient
    rest = 2 * batch * (64 * 24 * 24 * 32 * 9 + 9216 * 128 + 128 * 10)
    return 2 * conv1 + 3 * rest


def test_a_script_shaped_like_pytorch_examples_mnist():
    report = inspect(EXAMPLES / "mnist_cnn.py", ["--batch-size", "32", "--workers", "1"])
    assert report.ok, (report.problem, report.output_tail)
    assert report.flops_per_step == pytest.approx(mnist_cnn_flops(32), rel=0.05)
    assert report.findings == [], [f.evidence for f in report.findings]
    assert "Train Epoch: 1" in report.output_tail
    optimizer = next(p for p in report.memory if p.name == "optimizer state")
    # Adadelta: two buffers a parameter, and a one-number step counter per weight the formula leaves out
    assert optimizer.measured_bytes == pytest.approx(optimizer.formula_bytes, rel=1e-4)


def write(tmp_path: Path, name: str, code: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(code), encoding="utf-8")
    return path


TRAIN = """
import torch
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1000):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
"""


def run_cli(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["inspect", "--json", *argv])
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_a_transform_module_in_the_loader_is_data_not_the_model(tmp_path):
    # torchvision's transforms are nn.Modules, called inside the loader's __next__ with grad on: the
    # model's forward (its device, dtype, batch) is the one the report and the findings read
    script = write(
        tmp_path,
        "loader_transform.py",
        """
        import torch
        from torch.utils.data import DataLoader, Dataset

        class Scaled(Dataset):
            def __init__(self):
                self.x, self.y, self.scale = torch.randn(512, 8), torch.randint(0, 2, (512,)), torch.nn.Identity()
            def __len__(self):
                return 512
            def __getitem__(self, i):
                return self.scale(self.x[i]), self.y[i]

        model = torch.nn.Linear(8, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(50):
            for x, y in DataLoader(Scaled(), batch_size=16):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
        """,
    )
    ran = launch.run_script(script, [], warmup=WARMUP, steps=STEPS, timeout=60)
    assert ran.watched["forward"]["module"] == "Linear"
    assert ran.watched["forward"]["batch_shape"] == [16, 8]
    assert all(row["data_from"] == "loader" for row in ran.watched["timed"])


def test_a_crash_is_named_with_its_line(tmp_path, capsys):
    script = write(
        tmp_path,
        "crash.py",
        TRAIN.replace("opt.step()", "opt.step()\n    if step == 2:\n        raise ValueError('bad batch')"),
    )
    code, out = run_cli(capsys, str(script))
    assert code == 1 and out["outcome"] == "crashed"
    assert "ValueError at line 10: bad batch" in out["problem"] and "after 3 optimizer steps" in out["problem"]


def test_a_hang_is_stopped_at_the_limit_and_says_where(tmp_path, capsys):
    script = write(
        tmp_path,
        "hang.py",
        TRAIN.replace("opt.step()", "opt.step()\n    if step == 1:\n        import time; time.sleep(600)"),
    )
    code, out = run_cli(capsys, "--timeout", "8", str(script))
    assert code == 1 and out["outcome"] == "timed_out"
    assert "time limit" in out["problem"] and "after 2 optimizer steps" in out["problem"]


def test_no_torch_and_what_it_wrote(tmp_path, capsys):
    script = write(tmp_path, "hello.py", "print('hello from the script')\nopen('notes.txt', 'w').write('x')\n")
    code, out = run_cli(capsys, str(script))
    assert code == 1 and out["outcome"] == "no_torch" and "does not use torch" in out["problem"]
    assert "hello from the script" in out["output_tail"] and out["files_written"] == ["notes.txt"]


def test_a_script_that_does_not_train(tmp_path, capsys):
    script = write(tmp_path, "eval.py", "import torch\nprint(torch.nn.Linear(3, 1)(torch.ones(3)))\n")
    code, out = run_cli(capsys, str(script))
    assert code == 1 and out["outcome"] == "no_training" and "without taking an optimizer step" in out["problem"]


def test_a_script_that_exits_with_a_message_says_it_as_python_would(tmp_path, capsys):
    script = write(tmp_path, "nodata.py", "import sys\nimport torch\nsys.exit('MNIST is not in ./data')\n")
    code, out = run_cli(capsys, str(script))
    assert code == 1 and "exited with code 1" in out["problem"]
    assert out["output_tail"].strip().endswith("MNIST is not in ./data")


def test_a_missing_script_is_bad_input(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "nope.py")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_the_scripts_own_arguments_go_after_the_double_dash(capsys):
    code, out = run_cli(capsys, "--steps", "3", str(SMALL), "--warmup", "1", "--", "--mistake", "item")
    assert code == 0 and out["args"] == ["--mistake", "item"] and out["steps_timed"] == 3
    assert [f["key"] for f in out["findings"]] == ["sync-per-step"]


def test_the_overhead_window_takes_every_hook_off_for_its_plain_blocks_and_puts_them_back(tmp_path):
    """--compare-plain's blocks in turns: a plain block runs with PyTorch's own functions and no
    module hook (only the step clock), a watched one with the watch, and uninstall leaves nothing."""
    import torch
    from torch.nn.modules import module as nn_module

    from tutor.inspect import hooks

    real_to, real_backward = torch.Tensor.to, torch.Tensor.backward
    hooks_before = len(nn_module._global_forward_pre_hooks)
    # three pairs: plain, watched | watched, plain | plain, watched (two plain blocks in a row)
    watch = hooks.Watch(str(tmp_path / "train.py"), warmup=1, steps=2, split_steps=0, overhead_pairs=3)
    watch.install()
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    watched_at: dict[int, bool] = {}  # step under way -> watched (a patch and the module hook on)
    try:
        for _ in range(5000):
            on = torch.Tensor.to is not real_to
            assert on == (torch.Tensor.backward is not real_backward)
            if watch._in_probe():  # the FLOP counter's own module tracker hooks every module then
                watched_at[watch.step + 1] = on
                opt.zero_grad()
                model(torch.randn(8, 4)).sum().backward()
                opt.step()
                continue
            everywhere = len(nn_module._global_forward_pre_hooks) > hooks_before
            # every module call hooked in the warm-up; after it only the loop's own call (the model)
            switched = watch.step >= max(1, watch.warmup - 1)
            assert (bool(model._forward_pre_hooks) if switched else everywhere) == on
            assert not (everywhere and model._forward_pre_hooks)
            watched_at[watch.step + 1] = on
            opt.zero_grad()
            model(torch.randn(8, 4).to(torch.float32)).sum().backward()
            opt.step()
    except hooks.Stopped:
        pass
    finally:
        watch.uninstall()
    assert torch.Tensor.to is real_to and torch.Tensor.backward is real_backward
    assert len(nn_module._global_forward_pre_hooks) == hooks_before and not model._forward_pre_hooks
    n = watch.block_steps
    assert watch.finished and [b["plain"] for b in watch.blocks] == [True, False, False, True, True, False]
    assert all(b["seconds"] > 0 for b in watch.blocks)
    first = watch.last_step + 1
    for i, block in enumerate(watch.blocks):
        steps = range(first + i * n, first + (i + 1) * n)
        assert {watched_at[s] for s in steps} == {not block["plain"]}, i
    assert all(watched_at[s] for s in range(1, first))  # the report's own windows are all watched


def test_compare_plain_reports_the_overhead_with_its_interval(capsys, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU finding (no-autocast) on a GPU box either
    code, out = run_cli(capsys, "--warmup", "2", "--steps", "6", "--compare-plain", str(SMALL), "--", "--steps", "3000")
    assert code == 0 and out["findings"] == []
    o = out["overhead"]
    assert o["pairs"] == 10 and o["block_steps"] >= 2 and not o["short"]
    assert 0 < o["low"] <= o["ratio"] <= o["high"] and o["watched_ms"] > 0 and o["plain_ms"] > 0


@pytest.mark.gpu
def test_compare_plain_on_a_gpu_times_each_block_synchronised(capsys):
    code, out = run_cli(
        capsys, "--warmup", "2", "--steps", "6", "--compare-plain", str(SMALL), "--", "--steps", "20000"
    )
    assert code == 0 and out["split_how"].startswith("GPU")
    o = out["overhead"]
    assert o["pairs"] == 10 and 0 < o["low"] <= o["ratio"] <= o["high"]


def test_a_loop_with_two_optimizers_is_one_step_a_turn(tmp_path):
    """A GAN steps a discriminator and a generator each turn of its loop: one step is the turn, its
    FLOPs and memory both models', the second optimizer's step optimizer time inside it."""
    script = write(
        tmp_path,
        "gan.py",
        """
        import torch
        import torch.nn.functional as F

        torch.manual_seed(0)
        gen, disc = torch.nn.Linear(16, 32), torch.nn.Linear(32, 1)
        opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3)
        opt_d = torch.optim.SGD(disc.parameters(), lr=1e-2)
        real = torch.randn(64, 32)
        for step in range(2000):
            opt_d.zero_grad()
            fake = gen(torch.randn(64, 16)).detach()
            d_loss = F.softplus(-disc(real)).mean() + F.softplus(disc(fake)).mean()
            d_loss.backward()
            opt_d.step()
            opt_g.zero_grad()
            g_loss = F.softplus(-disc(gen(torch.randn(64, 16)))).mean()
            g_loss.backward()
            opt_g.step()
        """,
    )
    report = inspect(script, [])
    assert report.ok and report.steps_timed == STEPS, (report.problem, report.output_tail)
    weights = next(p for p in report.memory if p.name == "weights")
    assert weights.measured_bytes == (16 * 32 + 32 + 32 + 1) * 4  # both models
    state = next(p for p in report.memory if p.name == "optimizer state")
    # Adam's two buffers for the generator, and its step counter (one float per tensor); SGD none
    assert state.measured_bytes == (16 * 32 + 32) * 4 * 2 + 2 * 4
    # a turn: the discriminator on real, on fake, on the generator's output; the generator twice
    forward = 2 * 64 * (32 * 1) * 3 + 2 * 64 * (16 * 32) * 2
    backward = 2 * 64 * 32 * 1 * 2 + 2 * 64 * 32 * 1 + 2 * 64 * 32 * 1 + 2 * 64 * 16 * 32
    assert report.flops_per_step == forward + backward
    assert report.findings == [], [f.evidence for f in report.findings]


AMP = """
import sys
import torch
import torch.nn.functional as F

backward_inside, scaled = sys.argv[1] == "inside", sys.argv[2] == "scaler"
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu", enabled=scaled)
x, y = torch.randn(64, 32), torch.randint(0, 4, (64,))
for step in range(500):
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x), y)
        if backward_inside:
            scaler.scale(loss).backward()
    if not backward_inside:
        scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
"""


@pytest.mark.parametrize(
    "where,scaler,expected",
    [
        ("inside", "scaler", {"autocast-backward", "scaler-bf16"}),
        ("outside", "scaler", {"scaler-bf16"}),
        ("inside", "none", {"autocast-backward"}),
        ("outside", "none", set()),
    ],
)
def test_autocast_around_backward_and_a_scaler_with_bfloat16_are_found_on_a_cpu_too(tmp_path, where, scaler, expected):
    """CPU autocast runs in bfloat16 and torch.amp.GradScaler("cpu") exists: both mistakes of the
    mixed-precision lesson are watched for real here, not only on a GPU."""
    report = inspect(write(tmp_path, "amp.py", AMP), [where, scaler])
    assert report.ok, (report.problem, report.output_tail)
    assert keys(report) == expected, [f.evidence for f in report.findings]


def test_the_overhead_window_takes_only_the_pairs_that_fit_before_the_deadline(tmp_path):
    """Its blocks come after the report's windows: a slow step gets fewer pairs, never a timed-out
    run that loses a finished report."""
    import time

    import torch

    from tutor.inspect import hooks

    watch = hooks.Watch(str(tmp_path / "train.py"), warmup=1, steps=2, split_steps=0, overhead_pairs=10)
    watch.deadline = time.time() + 1.5
    watch.install()
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    try:
        for _ in range(200):
            opt.zero_grad()
            model(torch.randn(8, 4)).sum().backward()
            time.sleep(0.05)
            opt.step()
    except hooks.Stopped:
        pass
    finally:
        watch.uninstall()
    assert watch.finished and time.time() < watch.deadline
    assert 1 <= watch.overhead_pairs < 10 and len(watch.blocks) == 2 * watch.overhead_pairs
    assert watch.result()["overhead_pairs_wanted"] == 10


def test_an_optimizer_that_steps_another_is_counted_once(tmp_path):
    """A wrapper (shaped like timm's Lookahead) steps its base optimizer inside its own step: one
    step, its parameters and state once, and the zero_grad check still on."""
    script = write(
        tmp_path,
        "wrapped.py",
        """
        import torch

        class Wrapper(torch.optim.Optimizer):
            def __init__(self, base):
                self.base = base
                super().__init__(base.param_groups, base.defaults)
                self.param_groups, self.state = base.param_groups, base.state

            @torch.no_grad()
            def step(self, closure=None):
                return self.base.step(closure)

        model = torch.nn.Linear(100, 10)
        opt = Wrapper(torch.optim.Adam(model.parameters()))
        for i in range(1000):
            loss = model(torch.randn(8, 100)).sum()
            loss.backward()  # no zero_grad: gradients pile up
            opt.step()
        """,
    )
    report = inspect(script, [])
    assert report.ok and report.steps_timed == STEPS, report.problem
    parts = {p.name: p.measured_bytes for p in report.memory}
    assert parts["weights"] == 1010 * 4 and parts["optimizer state"] == 1010 * 4 * 2 + 2 * 4
    assert "no-zero-grad" in keys(report)


def test_a_loaders_thread_beside_the_training_thread_is_not_the_step(tmp_path):
    """A prefetching thread iterates the DataLoader (its transforms are modules) while the main
    thread trains: the model's forward is the one read, and the step's clock is the main thread's."""
    script = write(
        tmp_path,
        "prefetch.py",
        """
        import queue, threading
        import torch
        import torch.nn.functional as F
        from torch.utils.data import DataLoader, Dataset

        class Decoded(Dataset):
            def __init__(self):
                self.decode = torch.nn.Identity()  # a transform, as torchvision's are modules
            def __len__(self):
                return 10**6
            def __getitem__(self, i):
                return self.decode(torch.randn(32)), 0

        def prefetch(q):
            for batch in DataLoader(Decoded(), batch_size=16):
                q.put(batch)

        q = queue.Queue(maxsize=4)
        threading.Thread(target=prefetch, args=(q,), daemon=True).start()
        model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(5000):
            x, y = q.get()
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        """,
    )
    ran = launch.run_script(script, [], warmup=WARMUP, steps=STEPS, timeout=60)
    assert ran.watched["forward"]["module"] == "Sequential" and ran.watched["forward"]["batch_shape"] == [16, 32]
    assert all(row["forward"] > 0 and row["backward"] > 0 for row in ran.watched["timed"])


def test_the_samples_of_a_step_sum_gradient_accumulations_micro_batches(tmp_path):
    """What an inspect requirement's per-sample speed-up divides by: the model's inputs, every call
    of the step (three micro-batches of 8 are 24), never the loss module's."""
    import torch

    from tutor.inspect import hooks

    watch = hooks.Watch(str(tmp_path / "train.py"), warmup=1, steps=3, split_steps=0)
    watch.install()
    model, loss_fn = torch.nn.Linear(4, 2), torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    try:
        for _ in range(100):
            for _micro in range(3):
                loss_fn(model(torch.randn(8, 4)), torch.randint(0, 2, (8,))).backward()
            opt.step()
            opt.zero_grad()
    except hooks.Stopped:
        pass
    finally:
        watch.uninstall()
    assert [row["samples"] for row in watch.timed] == [24, 24, 24]


def watch_in_process(tmp_path, loop, warmup=3, steps=4):
    """`loop(watch)` run under a Watch in this process until it stops; the watch."""
    from tutor.inspect import hooks

    watch = hooks.Watch(str(tmp_path / "train.py"), warmup=warmup, steps=steps, split_steps=0)
    watch.install()
    try:
        loop()
    except hooks.Stopped:
        pass
    finally:
        watch.uninstall()
    return watch


def test_a_gan_that_steps_its_generator_twice_a_turn_keeps_one_step_a_turn(tmp_path):
    import torch

    gen, disc = torch.nn.Linear(8, 16), torch.nn.Linear(16, 1)
    opt_g, opt_d = torch.optim.Adam(gen.parameters()), torch.optim.SGD(disc.parameters(), lr=0.1)

    def loop():
        for _ in range(200):
            opt_d.zero_grad()
            disc(gen(torch.randn(32, 8)).detach()).mean().backward()
            opt_d.step()
            for _twice in range(2):  # a DCGAN tweak: the generator twice a turn
                opt_g.zero_grad()
                (-disc(gen(torch.randn(32, 8)))).mean().backward()
                opt_g.step()

    watch = watch_in_process(tmp_path, loop)
    assert watch._anchor() is opt_d
    # a turn is counted by the module its first forward calls, the generator: three calls of 32
    assert [row["samples"] for row in watch.timed] == [96] * 4


def test_a_checkpointed_forward_recomputed_in_backward_is_not_counted_twice(tmp_path):
    import torch
    from torch.utils.checkpoint import checkpoint

    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def loop():
        for _ in range(100):
            opt.zero_grad()
            checkpoint(model, torch.randn(64, 8), use_reentrant=False).sum().backward()
            opt.step()

    assert [row["samples"] for row in watch_in_process(tmp_path, loop).timed] == [64] * 4


def test_a_model_first_called_after_the_warm_up_puts_the_hooks_back_on_every_module(tmp_path):
    import torch

    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def loop():
        for i in range(100):
            # from the fifth step a fresh module each step (a meta-learning inner loop), sharing the weights
            net = model if i < 4 else torch.nn.Linear(8, 2)
            net.weight, net.bias = model.weight, model.bias
            opt.zero_grad()
            net(torch.randn(16, 8)).sum().backward()
            opt.step()

    watch = watch_in_process(tmp_path, loop)
    assert watch._tops is None  # back to every module
    assert all(row["forward"] > 0 and row["samples"] == 16 for row in watch.timed[1:])


def test_an_optimizer_step_that_raised_and_was_caught_does_not_stop_the_count(tmp_path):
    import torch

    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    state = {"raised": False}

    def failing_once(optimizer, args, kwargs):  # a step that raises once, in the optimizer's own step
        if not state["raised"]:
            state["raised"] = True
            raise RuntimeError("planted")

    handle = opt.register_step_pre_hook(failing_once)

    def loop():
        for _ in range(100):
            opt.zero_grad()
            model(torch.randn(8, 4)).sum().backward()
            try:
                opt.step()
            except RuntimeError:
                pass

    watch = watch_in_process(tmp_path, loop)
    handle.remove()
    assert state["raised"] and watch.finished and len(watch.timed) == 4


def test_a_model_given_its_batch_by_keyword_counts_its_samples(tmp_path):
    """Hugging Face's loop calls model(**batch): the samples come from the keyword tensors."""
    import torch

    class Classifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 2)

        def forward(self, input_ids=None, labels=None):
            return torch.nn.functional.cross_entropy(self.linear(input_ids), labels)

    model = Classifier()
    opt = torch.optim.AdamW(model.parameters())

    def loop():
        for _ in range(100):
            batch = {"input_ids": torch.randn(12, 8), "labels": torch.randint(0, 2, (12,))}
            model(**batch).backward()
            opt.step()
            opt.zero_grad()

    watch = watch_in_process(tmp_path, loop)
    assert [row["samples"] for row in watch.timed] == [12] * 4
    assert watch.forward_info["batch_shape"] == [12, 8]
