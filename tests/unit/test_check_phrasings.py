"""The four check questions of the gpu-training lesson, graded on real learner phrasings.

Each answer below was labelled by hand (right / wrong, and for wrong answers the
misconception a careful tutor would name, or None when the answer is merely incomplete).
The rubrics under test are the ones in lessons/gpu-training.yaml, so this file fails when
a rubric edit makes the grader disagree with the labels.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tutor.checks import grade
from tutor.checks.answers import TextAnswer

ROOT = Path(__file__).resolve().parents[2]
LESSON = ROOT / "lessons" / "gpu-training.yaml"
CHECKS = ("check-1-error", "check-1-loop", "check-2", "check-3")

# ----------------------------------------------------------------------------- corpus
# right: answers a careful human accepts. wrong: (answer, misconception expected or None).

CORPUS: dict[str, dict[str, list]] = {
    "check-1-error": {
        "right": [
            "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, "
            "cuda:0 and cpu! It is raised at outputs = model(inputs).",
            "a RuntimeError at model(inputs) saying the tensors are on different devices",
            "device mismatch error on the forward pass",
            "RuntimeError, expected all tensors on same device. line: output = model(x)",
            "You get a RuntimeError because the input is on the cpu and the weights are on cuda:0. It happens on "
            "the line where the model is called, model(inputs), inside the first linear layer.",
            "runtime error - tensors on different devices (cpu vs cuda). happens in the forward pass",
            "Error: expected all tensors to be on the same device. Its thrown in the forward call, when fc1 "
            "multiplies the weights with the input.",
            "The forward pass crashes with a device mismatch (cuda:0 and cpu).",
            "RuntimeError about the tensors not being on the same device, at model(inputs)",
            "outputs = model(inputs) fails: RuntimeError, input on CPU but weights on GPU",
            "It fails when you call the model on the data: the model's weights live on the GPU while the batch is "
            "still on the CPU, so PyTorch raises a RuntimeError (expected all tensors to be on the same device).",
            "runtimeerror expected all tensors to be on the same device, found cuda:0 and cpu. line: pred = model(images)",
            "Device mismatch RuntimeError at the first layer (fc1) during the forward pass, because the inputs "
            "stay on the cpu",
            "the line model(inputs) raises an error that cpu and cuda tensors can't be mixed",
            "You'd get 'Expected all tensors to be on the same device' on the forward pass line. "
            "model.to(device) itself works fine.",
            "There's no error at model.to(device); the error comes at model(inputs): a RuntimeError because the "
            "data is on the cpu and the model on the gpu.",
            "Forward pass. RuntimeError: tensors on two different devices.",
            "it crashes at model(inputs) with a device mismatch, before loss.backward() is ever reached",
            "A RuntimeError (device mismatch) at `logits = model(batch)`; the backward pass never runs.",
            "the model(inputs) line throws RuntimeError: Expected all tensors to be on the same device, but found "
            "at least two devices, cuda:0 and cpu! (when checking argument for argument mat1 in method "
            "wrapper_CUDA_addmm)",
            "runtime eror at the forwrad pass, tensors on diffrent devices",
            "the forward pass fails because the input tensor is on the CPU and the model parameters are on the "
            "GPU \u2013 you get RuntimeError",
            "model(x) -> RuntimeError: expected all tensors to be on the same device",
            "You'd see a RuntimeError complaining that it found tensors on cuda:0 and cpu. It's raised inside "
            "model(inputs), in the first nn.Linear (the addmm).",
            "Same-device RuntimeError, raised by the linear layer when the model is applied to the inputs",
            "error: tensors are on different devices; it happens when the data is passed through the model",
            "RuntimeError (device mismatch) on the line that calls the model; not on the .to() line and not at "
            "backward",
            "a device mismatch runtime error on the prediction line y_pred = model(X)",
            "The first line that uses both: output = model(inputs). It raises RuntimeError: Expected all tensors "
            "to be on the same device.",
            "Its not an out of memory error: it's a RuntimeError because input and weight are on different "
            "devices, at model(inputs).",
            "RUNTIMEERROR AT MODEL(INPUTS): EXPECTED ALL TENSORS TO BE ON THE SAME DEVICE",
            "\u201cExpected all tensors to be on the same device\u201d \u2014 raised by model(inputs), not by "
            "loss.backward()",
            "You'll hit RuntimeError: Expected all tensors to be on the same device when the batch goes into the network (the forward pass).",
            "model(inputs) → 'found at least two devices, cuda:0 and cpu'",
            "A RuntimeError in the first Linear layer during forward: the weight is a CUDA tensor but the input is a CPU tensor.",
            "it blows up on outputs = model(inputs) with a runtime error because inputs is still a cpu tensor while the parameters are on cuda",
            "RuntimeError on the forward step: input and weight tensors live on different devices",
            "The error appears at the forward call: torch complains the input (cpu) and the weights (cuda:0) aren't on the same device.",
            "runtime error on line outputs=model(inputs): tensors on cpu and gpu",
            "the call model(images) fails with 'Expected all tensors to be on the same device, but found at least two devices'",
            "device error: inputs on cpu, model on cuda. raised as soon as the model gets the batch (forward)",
            "You get RuntimeError: expected all tensors on the same device. It's raised inside fc1 when the model is run on the inputs.",
            "```\noutputs = model(inputs)  # <- RuntimeError here\n```\nExpected all tensors to be on the same device",
            "I think it's a RuntimeError, the input is on the cpu and the model on cuda, and it happens in the forward, not in backward.",
            "Not OOM, not a shape error: the forward pass raises a device mismatch RuntimeError.",
            "forward pass (model(inputs)), RuntimeError: tensors on different devices cpu/cuda",
            "The first layer's matmul gets a cuda weight and a cpu input -> RuntimeError device mismatch",
            "PyTorch doesn't move the data automatically, so model(inputs) raises RuntimeError: expected all tensors to be on the same device.",
            "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu. It is raised at outputs = model(inputs), in the forward pass.",
            "You get a runtime error saying the tensors are on different devices (cuda and cpu); it happens on the line where you call model(inputs).",
            "A device mismatch RuntimeError in the forward pass, when fc1 multiplies the CPU batch by its GPU weights.",
            "RuntimeError at model(inputs), expected all tensors to be on the same device",
            # the message's wording varies with the PyTorch version and the op; all of these are right
            "outputs = model(inputs) raises RuntimeError: Expected all tensors to be on the same device, but got "
            "mat1 is on cpu, different from other tensors on cuda:0 (when checking argument in method "
            "wrapper_CUDA_addmm)",
            "RuntimeError at model(inputs): mat1 is on cpu, different from other tensors on cuda:0",
            # what the device-mismatch run prints without a GPU (model on meta)
            "RuntimeError: Tensor on device meta is not on the expected device cpu! at outputs = model(inputs)",
        ],
        "wrong": [
            ("RuntimeError at loss.backward()", "later-line"),
            ("the error happens at loss.backward() because the gradients are on different devices", "later-line"),
            ("optimizer.step() fails because the parameters are on cuda and the grads on cpu", "later-line"),
            ("No error, PyTorch moves the data to the GPU automatically.", "no-error"),
            ("It works fine, the data is moved automatically when it meets the model", "no-error"),
            ("there's no error, it just runs slower on the cpu", "no-error"),
            ("CUDA out of memory error", "out-of-memory"),
            ("OOM at model(inputs)", "out-of-memory"),
            ("a shape mismatch error: mat1 and mat2 shapes cannot be multiplied", "shape-error"),
            ("size mismatch at the first linear layer", "shape-error"),
            ("the error is raised at model.to(device)", "at-to-call"),
            ("model.to(device) throws a RuntimeError because the data isn't on the gpu", "at-to-call"),
            ("on the line where you call .to() on the model", "at-to-call"),
            ("TypeError: expected all tensors to be on the same device at model(inputs)", "wrong-exception-type"),
            ("You get an error.", None),
            ("RuntimeError", None),
            ("A device mismatch error", None),
            ("tensors on different devices", None),
            ("at model(inputs)", None),
            ("It crashes in the forward pass.", None),
            ("the loss function raises an error because the labels are on the cpu", "later-line"),
            (
                "The error occurs when computing the loss: criterion(outputs, labels) gets tensors on cpu and cuda",
                "later-line",
            ),
            ("nothing happens, the training just runs on the CPU", "no-error"),
            ("it silently trains on the cpu instead", "no-error"),
            ("a CUDA error: device-side assert triggered", "wrong-exception-type"),
            ("an AttributeError because tensors have no attribute device", "wrong-exception-type"),
            (
                "Expected all tensors to be on the same device, at the dataloader line `for inputs, labels in loader`",
                None,
            ),
            ("Device mismatch at backward()", "later-line"),
            ("the GPU runs out of memory because the data is copied twice", "out-of-memory"),
            ("You get a device mismatch when you call optimizer.zero_grad()", "later-line"),
            ("At model.to(device), because the model cannot be moved while the data is on the cpu", "at-to-call"),
            ("It doesn't fail at model(inputs); the device mismatch only shows up at loss.backward().", "later-line"),
            ("", None),
            ("idk", None),
            ("ValueError at model(inputs)", "wrong-exception-type"),
            ("It raises at loss = criterion(outputs, labels)", "later-line"),
            ("RuntimeError: CUDA out of memory at model(inputs)", "out-of-memory"),
            ("no error, but training is slow", "no-error"),
            ("The error is on the line model.to(device) because the data isn't there yet", "at-to-call"),
            ("an error about devices", None),
            ("It fails during backpropagation with a device mismatch", "later-line"),
            ("the optimizer complains that the parameters are on the GPU", "later-line"),
            ("RuntimeError: mat1 and mat2 shapes cannot be multiplied (32x784 and 256x784)", "shape-error"),
            ("it just uses the CPU automatically so nothing breaks", "no-error"),
            ("PyTorch moves the inputs to the model's device, so there is no error.", "no-error"),
            ("The .to(device) line raises, because you can't move a model when the data is on the CPU", "at-to-call"),
            ("RuntimeError: expected all tensors to be on the same device, at loss.backward()", "later-line"),
            ("a RuntimeError saying CUDA out of memory", "out-of-memory"),
            ("At the forward pass you get a shape mismatch error", "shape-error"),
            ("the data loader raises an error", None),
            ("It works, PyTorch moves the data to the GPU automatically, just slower.", "no-error"),
            ("A RuntimeError at loss.backward() because the gradients are on different devices.", "later-line"),
            ("CUDA out of memory error when loading the data.", "out-of-memory"),
            ("A RuntimeError about tensors being on different devices.", None),
            (
                "The message says mat1 is on cpu, different from other tensors on cuda:0, raised by optimizer.step()",
                "later-line",
            ),
            ("model(inputs) raises RuntimeError: the tensor is on the expected device", None),
        ],
    },
    "check-1-loop": {
        "right": [
            "Because the DataLoader yields new CPU tensors every iteration, so each batch has to be moved to the "
            "device inside the loop.",
            "each batch is a new tensor on the cpu; moving once only moves the first one",
            "inputs gets overwritten by the next batch from the dataloader, which is on the CPU again",
            "the loader creates fresh tensors every step, they all start on the cpu. move them inside the loop",
            ".to() is not in-place for tensors: it returns a new tensor, so without inputs = inputs.to(device) "
            "nothing changes. And every batch is new anyway, so it has to happen inside the loop.",
            "every iteration the for loop rebinds inputs to a new batch that lives on the CPU",
            "Moving once is not enough: the data loader hands out a new batch on the CPU each iteration, so the "
            ".to(device) call has to be inside the loop.",
            "The dataloader gives you new tensors on each iteration, and they're on the cpu.",
            "new batch every iteration -> must call .to(device) per batch",
            "tensor.to() returns a copy instead of moving the tensor in place, so the original inputs stays on the cpu",
            "it only moves that one tensor. the loop gets the next batches straight from the dataloader, still on cpu",
            "Because `for inputs, labels in loader:` reassigns inputs each time to a freshly loaded CPU batch, the "
            "earlier .to(device) has no effect on it.",
            "The batches are produced by the DataLoader in the loop, so they're created on the CPU every time; "
            "you need inputs.to(device) inside the loop.",
            "data loader returns cpu tensors every iteration. u need to move each batch inside the loop",
            "Only the first batch would end up on the GPU (and only if you assign the result); all the next "
            "batches come from the loader on the cpu.",
            "each iteration gives a new batch, the one you moved is gone",
            "Because inputs.to(device) doesn't change inputs, it returns a new tensor that is thrown away unless "
            "you assign it.",
            "The loader yields a new batch per iteration which lives in CPU memory; you need to move every batch.",
            "It doesn't move the tensor in place, you must write inputs = inputs.to(device), and you must do it "
            "for each batch in the loop",
            "the variable is replaced every loop iteration by the next batch from the DataLoader (on cpu)",
            "There is no single 'inputs' tensor before the loop \u2014 the DataLoader creates a new one for each "
            "batch, on the CPU.",
            "The dataloader loads each batch fresh from the CPU dataset, so every batch needs its own .to(device).",
            "the batches are new tensors every time, moving the first does nothing for the rest",
            "Dataloader -> new CPU tensors each iteration. Must be moved inside the loop.",
            "Because each batch is loaded from the dataset on the CPU when the loop asks for it, the move has to "
            "happen per batch inside the loop; also .to() returns a new tensor",
            "tensors get recreated by the dataloader every iteration",
            "The model is moved once and stays there, but the data is not: each batch is a brand-new CPU tensor "
            "from the DataLoader, so you move it inside the loop.",
            "moving once doesn't work because the loop pulls a new batch from the dataloader each time",
            "It's not that the DataLoader moves it back: it just gives you a different tensor every iteration, "
            "made on the CPU.",
            "x.to('cuda') makes a copy; the loop variable is a new cpu batch each iteration anyway",
            "Because each time the loop runs, it takes a new batch from the DataLoader, and that batch is on the CPU.",
            "The loop variable inputs is reassigned on every iteration, so the tensor you moved before the loop isn't the one you train on.",
            "calling .to once only affects the tensor you had at that moment; the loader keeps producing new cpu tensors",
            "Tensors aren't moved in place; .to returns a moved copy, and you'd need to do it for every batch anyway.",
            "each loop iteration gets fresh data from the dataloader which sits in RAM, so the transfer must be in the loop body",
            "inputs is overwritten each iteration",
            "because for batch in loader gives you a brand new cpu tensor every time, the one you moved is never used",
            "you moved a tensor that the loop throws away; the batches it actually uses come from the DataLoader on the CPU each iteration",
            "It only moves one batch. Every other batch comes out of the loader on the cpu.",
            "The .to() call makes a GPU copy and leaves the original alone, and the loop loads new batches on the CPU anyway.",
            "for x, y in loader: ← x is a new CPU tensor here every time. Moving one tensor before the loop doesn't change the ones that come later.",
            "It doesn't work because the tensors yielded by the DataLoader are new objects each iteration (on the CPU); inputs.to(device) before the loop only produced one GPU tensor, and it wasn't even assigned.",
            "Since .to() isn't in-place, and since each batch is new, the move needs to be `inputs = inputs.to(device)` inside the loop.",
            "the dataloader yields cpu batches, one per iteration, and those are the tensors the model sees",
            "Not because it's slow: every iteration gives a different tensor, created on the CPU.",
            "data is loaded batch by batch inside the loop, so the transfer has to happen there too",
            "The DataLoader hands out a new batch of CPU tensors on every iteration, so moving one tensor before the loop does nothing for the batches that follow. Move inputs and labels inside the loop.",
            "Each iteration of the for loop gets fresh tensors from the loader, and they live on the CPU. Also .to() returns a copy rather than moving the tensor in place. You have to call .to(device) on every batch inside the loop.",
            "every batch is a new tensor created on the cpu by the dataloader, so the .to(device) has to happen per batch inside the loop",
            "every batch is a different tensor",
            "each iteration gives you another batch, on the cpu",
            "because the data changes each iteration",
            "the inputs change every iteration and come from the cpu",
        ],
        "wrong": [
            ("It works, it's just slower.", "once-is-enough"),
            ("you only need to move the data once, so it's fine", "once-is-enough"),
            ("The model should be moved to the device instead of the inputs.", "move-model-instead"),
            ("because you need to move the model, not the inputs", "move-model-instead"),
            ("it has to be inside the loop", None),
            ("Because it is outside the loop.", None),
            ("the GPU memory can't hold the whole dataset at once", "dataset-does-not-fit"),
            ("Moving all the data at once would run out of GPU memory", "dataset-does-not-fit"),
            ("because to() should be called after the model is created", None),
            ("The data is moved, but the gradients stay on the CPU", None),
            ("It does work, PyTorch keeps the tensor on the GPU for the whole training.", "once-is-enough"),
            ("the dataloader moves it back to the cpu each iteration", "moves-it-back"),
            ("to(device) has to be called on the model too", None),
            ("because .to() is asynchronous", None),
            ("You need to call .cuda() instead of .to(device)", None),
            ("The device variable isn't defined yet before the loop", None),
            ("It moves it once which is enough, the loop reuses the same tensor", "once-is-enough"),
            ("Because the first batch is moved but the model is still on the cpu", None),
            ("inputs.to(device) before the loop moves the whole dataset, which is too slow", None),
            ("It's fine as long as you also move the labels", "once-is-enough"),
            ("Because the optimizer needs the data on the CPU", None),
            ("because the loop moves the data back to the CPU after every step", "moves-it-back"),
            ("the data should be moved in the loop because of autograd", None),
            ("Moving the data once is the correct approach, the problem must be elsewhere.", "once-is-enough"),
            ("nothing, it works fine", "once-is-enough"),
            ("It's in place, so the tensor is on the GPU already; the issue is the model", "move-model-instead"),
            ("the dataloader shuffles the data so the tensor order is lost", None),
            ("   ", None),
            ("It would work fine, it's just redundant to move it again", "once-is-enough"),
            ("Because the model isn't on the GPU yet", None),
            ("Because the loop resets the device to cpu", "moves-it-back"),
            ("It is actually fine to do it once", "once-is-enough"),
            ("you should move the model inside the loop instead", "move-model-instead"),
            ("the data is too big to move in one go", "dataset-does-not-fit"),
            ("you need to use non_blocking=True", "pin-memory"),
            ("Because .to() only works inside a with torch.no_grad() block", None),
            ("The GPU forgets the tensor after the first iteration", None),
            ("It's enough to move the data once; the problem must be the labels.", "once-is-enough"),
            ("It doesn't matter where you call it, it's just a style issue", "once-is-enough"),
            ("Because the model has to be moved first", None),
            ("tensors move back to the CPU at the end of each iteration", "moves-it-back"),
            ("It works as long as you don't shuffle", "once-is-enough"),
            ("inputs.to(device) must be called before the model is created", None),
            ("The GPU can't keep tensors between iterations", None),
            ("It works, it is just slower because the transfer happens once.", "once-is-enough"),
            ("The GPU would run out of memory.", "dataset-does-not-fit"),
            ("You need to set pin_memory=True in the DataLoader.", "pin-memory"),
            ("Because .to() should be called on the model, not on the inputs.", "move-model-instead"),
            # restating the fix ("every time", "each batch") without the why
            ("every time you need to move", None),
            ("you have to move it every iteration", None),
            ("you need to move each batch", None),
            ("it needs to happen for every batch", None),
            ("because you have to do it per batch", None),
            ("Because the loop needs it every time.", None),
        ],
    },
    "check-2": {
        "right": [
            "The model and data are tiny, so there's too little work per step for the GPU; kernel launch and data "
            "transfer overhead dominate. Just train on the CPU.",
            "With 500 params and 200 samples the overhead of moving data to the GPU and launching kernels is larger "
            "than the compute. Stay on the CPU until the model gets bigger.",
            "that's expected, gpu only pays off for big models / big batches. overhead dominates here, use cpu",
            "Too small to benefit: each batch is only 32 tiny samples, so the GPU spends its time on launch "
            "overhead instead of math. Use the CPU, or scale up the model and batch size.",
            "Their workload is too small; the fixed cost per step (transfers, kernel launches, syncs) is bigger "
            "than the actual computation. CPU is the right choice here.",
            "Nothing is broken: a 500-parameter model cannot keep a GPU busy. Overheads dominate. Keep it on the cpu.",
            "GPU isn't always faster \u2014 for this tiny model the transfer overhead outweighs the parallelism. "
            "Train on CPU.",
            "not enough work to saturate the gpu, the overhead of copying each batch over pcie dominates. increase "
            "batch size/model size or stay on cpu",
            "The GPU has a startup and per-kernel launch cost; with only 7 batches of 32 and 500 weights, that "
            "cost is most of the time. For something this small, the CPU wins.",
            "It's normal: small models are latency-bound, not compute-bound. The launch/transfer overhead "
            "dominates. Use the CPU for this, or a much bigger model.",
            "tell them its too small for a gpu, overhead > compute, just use cpu",
            "Data transfer between host and device plus kernel launches cost more than the tiny matrix multiplies; "
            "the GPU only wins with larger models or batches, so use the CPU for now.",
            "The problem is too small to parallelize. The GPU's overhead (moving data, launching kernels) "
            "dominates; stick with the CPU until the model or data grows.",
            "Use the CPU. With this little compute per step, synchronisation and launch overhead dominate the runtime.",
            "The GPU is underutilized: 32 samples \u00d7 500 parameters is almost no work, so the fixed overheads "
            "dominate. Try a bigger batch size or just run on the CPU.",
            "Their GPU is fine. Tiny models don't benefit from GPUs because launching kernels and copying data "
            "costs more than the computation itself; the CPU is faster here.",
            "I'd say that's expected for such a small model: the time goes into overhead, not computation, so the "
            "CPU is the better device.",
            "The overhead of CPU-GPU communication is larger than the speedup from parallel computation for a "
            "model this small. Stay on CPU.",
            "Each step does so little math that the GPU sits idle waiting on kernel launches and transfers. Either "
            "make the model/batch much bigger or train on CPU.",
            "Small model, small data \u2192 overhead dominates; GPU pays off only when there's enough work. Keep "
            "using the CPU for this one.",
            "Increasing the learning rate or the epochs won't help; the model is simply too small for the GPU, the "
            "launch overhead dominates. Use CPU.",
            "A GPU needs lots of parallel work to beat a CPU. 500 parameters and batches of 32 don't give it "
            "enough, and every step pays transfer and launch latency. CPU it is.",
            "too little computation per batch, so the per-batch overhead (host-to-device copy, kernel launch) "
            "dominates; a bigger model or batch would make the GPU worth it",
            "It's not a bug: the fixed overhead per step is bigger than the work. Run it on the CPU.",
            "the gpu is slower because of overhead; the model is way too small. stay on cpu",
            "The speedup of a GPU comes from doing huge matrix multiplies in parallel. Here the matrices are tiny, "
            "so the transfer and kernel-launch overhead dominates. Use the CPU until the model/data get much "
            "bigger.",
            "Tell them it's expected: this job is too small for the GPU to pay off; the overhead of moving each "
            "batch and launching kernels dominates. The CPU is the right tool until the model and dataset grow.",
            "The idea that a GPU is always faster is a myth. Here the kernel launch overhead dominates because "
            "the network is tiny; use the cpu.",
            "GPUs only shine when there's enough parallel work; here every step is tiny, so kernel-launch and copy overhead eat the gains. Stick to the CPU for this.",
            "Expected. 500 parameters is nothing; the cost of shipping each batch to the GPU and starting kernels is bigger than the compute. CPU is fine for this size.",
            "The job is latency-bound: a few microseconds of math per step vs. fixed launch/transfer overhead. Use CPU until the model and batch get much larger.",
            "tell them the model is way too small to benefit from a GPU, the overhead of transfers and kernel launches dominates, keep it on cpu",
            "It's not worth using a GPU for such a small model and dataset; the data movement and launch overhead outweigh any speedup.",
            "With a model this small, the GPU spends most of its time waiting on the CPU to launch kernels. Either use the CPU or increase model size and batch size.",
            "Nothing is wrong with their setup: tiny workloads have overhead that dominates on a GPU. Try a bigger model or larger batches, otherwise stay on CPU.",
            "GPU has fixed per-step overhead (kernel launch, host-device sync) that a tiny 500-param model can't amortize. CPU will win here.",
            "Small batches and a tiny network don't give the GPU enough work, so transfer overhead dominates; just train on the CPU.",
            "It's the overhead: copying 32 samples to the GPU and launching a dozen kernels takes longer than computing them on the CPU. For something this size, the CPU is the right device.",
            "I'd tell them that's normal for a job this small. Per-batch transfer + kernel launch overhead dominates. The GPU pays off with bigger models and batches; until then use the CPU.",
            "Don't worry, the GPU isn't broken. The model (500 params) is far too small; overhead dominates. Use the CPU.",
            "Small workload → GPU overhead (launching kernels, moving batches over PCIe) > compute. CPU is better here; revisit when the model grows.",
            "For small models the CPU is faster because the GPU's overhead dominates.",
            "more epochs or a higher lr won't change anything: the per-step overhead of using the GPU is larger than the tiny amount of compute. Stay on CPU.",
            "tiny model + tiny batches = GPU idles while paying for transfers/launches, so CPU wins; scale up the work and the GPU will pay off",
            "That's expected: 500 parameters and 200 samples is far too little work, so kernel launch and data transfer overhead dominate. Stay on the CPU until the model and dataset are much bigger.",
            "The GPU only pays off when there is enough parallel work. With 7 batches of 32 and a 500-parameter model each step is dominated by fixed launch overhead; the CPU is the right tool here.",
            "Model too small and too few samples, the overhead of moving data to the GPU outweighs the compute. Use the CPU.",
            "The model is tiny, so kernel launches cost more than the math; use the CPU.",
            "It's a tiny job: the GPU's per-step overhead dominates.",
        ],
        "wrong": [
            ("Their GPU must be broken, GPUs are always faster.", "gpu-always-faster"),
            ("Check the CUDA drivers, something is misconfigured.", "something-broken"),
            ("Increase the learning rate so it converges faster on the GPU.", "learning-rate"),
            ("Train for more epochs, the GPU gets faster after warming up.", "more-epochs"),
            ("Use mixed precision to speed it up.", "mixed-precision-fix"),
            ("Make sure the model is actually on the GPU, it's probably running on the CPU.", "something-broken"),
            ("The GPU is always faster, so they must have forgotten to move the data.", "gpu-always-faster"),
            ("Reinstall PyTorch with CUDA support.", "something-broken"),
            ("use a bigger learning rate and more epochs", "learning-rate"),
            ("the model is too small", None),
            ("Use the CPU.", None),
            ("Increase the batch size to 1024.", None),
            ("They should use a faster GPU like an A100.", "something-broken"),
            ("Their dataset is too big for the GPU memory.", "too-big"),
            ("It's because of the learning rate", "learning-rate"),
            ("GPU training is always faster; they have a bug in their code", "gpu-always-faster"),
            ("Set num_workers higher in the DataLoader.", None),
            ("Use float64 for better precision", None),
            ("The batch size is too big, reduce it to 1", "too-big"),
            ("They need more epochs so the GPU can show its advantage", "more-epochs"),
            ("GPUs are slower than CPUs for training in general.", None),
            ("Their GPU is probably overheating.", "something-broken"),
            ("Overhead.", None),
            ("The model has too many parameters for the GPU", "too-big"),
            (
                "It should be faster on the GPU; maybe the drivers are outdated. The overhead can't explain it.",
                "gpu-always-faster",
            ),
            ("Switch to bf16 so the GPU tensor cores are used, then it will be faster", "mixed-precision-fix"),
            ("the GPU needs more data to warm up so run more epochs and it will overtake the CPU", "more-epochs"),
            ("The GPU should always win, maybe CUDA isn't installed properly.", "gpu-always-faster"),
            ("Lower the batch size to 1 so the GPU can process samples faster", None),
            ("Use a higher learning rate", "learning-rate"),
            ("Tell them to train longer; GPUs need time to get up to speed.", "more-epochs"),
            ("Their GPU is too old.", "something-broken"),
            ("Use DataParallel across multiple GPUs", None),
            ("It's probably a driver issue", "something-broken"),
            ("The dataset is too large, reduce it", "too-big"),
            ("They must be moving the data back and forth wrongly, GPUs are always faster", "gpu-always-faster"),
            ("Use torch.compile to speed it up", None),
            ("GPUs are always faster than CPUs for deep learning, so check their code.", "gpu-always-faster"),
            ("Increase the epochs to 100 so the GPU can catch up", "more-epochs"),
            ("They should lower the learning rate.", "learning-rate"),
            ("It's because of overhead.", None),
            ("The batch size is too large for the GPU, that's why.", "too-big"),
            # a different (fair) point: how they time it, not why the GPU loses
            ("measure it properly with synchronize, their timing is wrong", None),
            ("They are probably timing it wrong: without torch.cuda.synchronize the numbers are meaningless.", None),
            ("Measure both devices, warmed up and synchronised, before comparing.", None),
            # advice, or only half of the why
            ("too small, use the CPU", None),
            ("The dataset is small, so use the CPU.", None),
            ("The model is way too small for the GPU to pay off, stay on the CPU", None),
            ("GPUs have overhead; use the CPU.", None),
            ("Tell them to buy an RTX 4090.", "something-broken"),
            ("Their CUDA driver is probably broken, a GPU is always faster than a CPU.", "gpu-always-faster"),
            ("They should enable mixed precision to speed it up.", "mixed-precision-fix"),
            ("Tell them to train for more epochs.", "more-epochs"),
            ("GPUs are slow.", None),
        ],
    },
    "check-3": {
        "right": [
            "float16 can't represent very small numbers, so small gradients underflow to zero. Scaling the loss "
            "scales all gradients up into fp16's range; they are unscaled before optimizer.step().",
            "to stop small gradients from underflowing to 0 in fp16",
            "Because in half precision tiny gradients get flushed to zero. Multiplying the loss multiplies every "
            "gradient (chain rule), so they stay representable.",
            "fp16 has a narrow range (smallest ~6e-8), gradients below that become 0. Scaling shifts them up; the "
            "scaler divides them back before the step and skips steps with inf/NaN.",
            "so the gradients don't underflow in float16",
            "small gradient values would round to zero in float16, scaling the loss makes them bigger so they survive",
            "The gradients in fp16 are so small they'd vanish (become exactly zero). By scaling the loss by e.g. "
            "65536, backprop produces gradients 65536x bigger, which fit in fp16. GradScaler then unscales them "
            "before the optimizer step.",
            "Underflow. fp16's smallest positive value is about 6e-8, so smaller grads are lost; scaling prevents "
            "that.",
            "To keep small gradients from becoming zero in half precision: scale up, backprop, unscale.",
            "Because of float16's limited dynamic range: gradients smaller than 2^-24 flush to zero. Multiplying "
            "the loss scales all gradients proportionally, moving them into the representable range.",
            "to avoid underflow of the gradients in fp16 (not overflow \u2014 overflow is what the inf check is for)",
            "It's not about the learning rate; it's because fp16 gradients underflow to zero without it.",
            "Loss scaling: by the chain rule every gradient is multiplied by the same factor, so tiny fp16 "
            "gradients don't underflow; they're unscaled before optimizer.step so the update is unchanged.",
            "small grads underflow in fp16 -> scale loss so grads are bigger -> unscale before step",
            "float16 can only represent numbers down to about 6e-5 (normal) / 6e-8 (subnormal); many gradients are "
            "smaller and would be flushed to zero. Scaling the loss moves them up.",
            "Because with autocast the backward pass runs in fp16, and tiny gradients would be rounded to 0. The "
            "large factor pushes them into range; the scale is divided out again before the update, and if any "
            "gradient becomes inf the step is skipped and the scale reduced.",
            "to prevent gradient underflow",
            "gradients too small for half precision would turn into zeros, the scaling keeps them nonzero",
            "fp16 has few exponent bits so very small values underflow; multiplying the loss makes gradients "
            "large enough to be represented, then GradScaler unscales them.",
            "Without scaling, the small gradients would underflow to zero in float16 and the weights would stop "
            "updating.",
            "It makes the gradients bigger so that they are not lost to underflow in fp16, and it divides them "
            "back before optimizer.step() so the learning rate is effectively unchanged.",
            "because fp16 gradients can underflow; bf16 wouldn't need this since it has the fp32 exponent range",
            "To keep tiny gradients representable in float16: values below ~6e-8 become 0.",
            "Gradient underflow in FP16. The scale factor lifts the gradients above the smallest representable "
            "fp16 number.",
            "the loss is scaled so the backward pass produces larger gradients that don't get flushed to zero by "
            "float16's limited precision",
            "so gradients dont underflow when stored as fp16",
            "small gradients underflow in float16. scaling moves them up; if it overflows to inf, GradScaler skips "
            "the step and lowers the scale",
            "Underflowing gradients: in fp16 a gradient like 1e-8 is 0. Multiply the loss by 65536 and it's "
            "6.5e-4, representable. Then unscale.",
            "It is not to prevent overflow and not to make training faster: tiny fp16 gradients would underflow "
            "to zero.",
            "Because fp16 can't store tiny gradient values — they underflow to 0 — so the loss is scaled up to keep gradients in fp16's representable range, then scaled back down.",
            "Without it, gradients smaller than about 6e-8 round to zero in half precision.",
            "Multiplying the loss multiplies every gradient, so small ones don't get lost to fp16 underflow.",
            "small fp16 grads become 0; scaling keeps them alive",
            "To push small gradient values above float16's underflow threshold.",
            "fp16 only goes down to ~6e-5 normally (6e-8 subnormal); gradients below that flush to zero, so GradScaler scales the loss up and unscales the grads before stepping.",
            "It's to avoid gradients underflowing in float16. The scaler later divides them by the same factor, and if it sees inf it skips the step.",
            "the tiny gradients would otherwise become zeros in half precision",
            "to preserve small gradients that float16 can't represent",
            "float16 has a much smaller range than float32, so small gradients vanish to zero unless the loss is scaled up first",
            "gradient underflow",
            "fp16 flushes tiny grads to zero; loss scaling (×65536 by default) keeps them above 2^-24, and the scaler unscales before the step.",
            "The point is underflow, not overflow: small fp16 gradients would become 0.",
            "float16 can't hold values as small as many gradients, so they'd be lost; the scale factor makes them representable",
            "Because tiny gradients in fp16 would underflow — it has nothing to do with speed.",
            "so the small gradients are not rounded to zero in fp16",
            "float16 can't represent values below about 6e-8, so small gradients underflow to zero. Multiplying the loss by 65536 multiplies every gradient by the same factor (chain rule), lifting them into float16's range; GradScaler divides them back before optimizer.step and skips steps that overflowed to inf.",
            "Because many gradients are so small that in fp16 they flush to zero. Scaling the loss scales the gradients up so they survive backward, then they are unscaled before the update.",
            "to stop small gradients from underflowing in half precision: the scaled loss gives bigger gradients that are representable",
            # the purpose stated as the bad outcome it prevents
            "So that the gradients are not zero.",
            "so the gradients don't turn into zeros in fp16",
            "It keeps the gradients from being 0 in fp16.",
            "to avoid zero gradients in fp16",
            "so that tiny gradient values don't end up as 0 in half precision",
            "Otherwise the small gradients are 0 in float16.",
        ],
        "wrong": [
            ("To make the learning rate bigger.", "speed-or-bigger-steps"),
            ("so training is faster", "speed-or-bigger-steps"),
            ("to prevent overflow", "prevent-overflow"),
            ("because the gradients are too large in fp16 and would overflow", "prevent-overflow"),
            ("bf16 needs it because of its small mantissa", "bf16-needs-it"),
            ("because bfloat16 gradients underflow", "bf16-needs-it"),
            ("to make the gradients bigger so the model learns faster", "speed-or-bigger-steps"),
            ("so that the optimizer takes bigger steps", "speed-or-bigger-steps"),
            ("Because the loss is too small to print", None),
            ("The model is in float16 everywhere, so the loss has to be multiplied to match", "fp16-everywhere"),
            ("To improve accuracy.", None),
            ("It scales the gradients.", None),
            ("because float16 is faster", "speed-or-bigger-steps"),
            ("to normalize the loss", None),
            ("So the gradients don't explode.", "prevent-overflow"),
            ("to keep the weights in fp32", None),
            ("Because fp16 has less precision so the loss is rounded; multiplying makes it more precise", None),
            (
                "GradScaler multiplies the loss so that the gradients are larger, which speeds up convergence",
                "speed-or-bigger-steps",
            ),
            ("to prevent vanishing gradients in deep networks", "vanishing-gradient-problem"),
            ("Because bf16 has a smaller range than fp32", "bf16-needs-it"),
            ("So the loss isn't zero", None),
            ("it makes every operation run in float16", "fp16-everywhere"),
            ("To make backward() faster on tensor cores.", "speed-or-bigger-steps"),
            ("The scaler increases the loss so the model pays more attention to errors", None),
            ("Because the gradients overflow in float16 otherwise", "prevent-overflow"),
            ("so that fp16 doesn't lose the sign", None),
            ("to increase the effective learning rate", "speed-or-bigger-steps"),
            ("to prevent underflow and overflow", "prevent-overflow"),
            ("To make the loss bigger so the model trains faster", "speed-or-bigger-steps"),
            ("So that the gradients don't get too big", "prevent-overflow"),
            ("Because with bf16 gradients would otherwise underflow", "bf16-needs-it"),
            ("To avoid NaNs.", None),
            ("It increases the effective learning rate.", "speed-or-bigger-steps"),
            ("To make the gradients more accurate", None),
            ("because fp32 weights need big gradients", None),
            ("So the optimizer sees larger gradients and takes larger steps.", "speed-or-bigger-steps"),
            ("It prevents overflow in float16", "prevent-overflow"),
            (
                "because mixed precision runs everything in half precision so the loss needs to be bigger",
                "fp16-everywhere",
            ),
            ("so that the gradients overflow", None),
            ("because bf16 has fewer exponent bits than fp16", "bf16-needs-it"),
            ("to speed up training with tensor cores", "speed-or-bigger-steps"),
            ("To keep the loss from becoming too large", "prevent-overflow"),
            ("because fp16 has less precision than fp32", None),
            ("To make the learning rate effectively larger", "speed-or-bigger-steps"),
            ("To make training faster.", "speed-or-bigger-steps"),
            ("It increases the effective learning rate so the model converges faster.", "speed-or-bigger-steps"),
            ("To prevent overflow in float16.", "prevent-overflow"),
            ("Because it multiplies the loss by a large number.", None),
            # a zero, but not a gradient that underflows
            ("because the learning rate in fp16 is zero", None),
            ("because the learning rate becomes zero in fp16", None),
            ("so the loss does not become zero", None),
            ("because the loss would round to 0 in fp16", None),
            ("so that the weights are not zero", None),
            ("because zero_grad sets the gradients to zero", None),
        ],
    },
}


# ----------------------------------------------------------------------------- specs


def lesson_specs() -> dict[str, TextAnswer]:
    """The four checks' answer specs, from the real lesson file."""
    from tutor.course.lesson import CheckStep
    from tutor.course.loader import load_file

    lesson = load_file(LESSON)
    out = {}
    for step_id in CHECKS:
        step = lesson.step(step_id)
        assert isinstance(step, CheckStep), step_id
        assert isinstance(step.answer, TextAnswer) and step.answer.rubric is not None, step_id
        out[step_id] = step.answer
    return out


SPECS = lesson_specs()


def _cases(kind: str):
    for check, corpus in CORPUS.items():
        for i, item in enumerate(corpus[kind]):
            if kind == "right":
                yield pytest.param(check, item, None, id=f"{check}-right-{i}")
            else:
                text, misconception = item
                yield pytest.param(check, text, misconception, id=f"{check}-wrong-{i}")


@pytest.mark.parametrize("check,answer,_", list(_cases("right")))
def test_right_answers_are_accepted(check, answer, _):
    verdict = grade(answer, SPECS[check])
    assert verdict.correct, f"{check}: rejected a right answer: {answer!r} -> {verdict.feedback}"
    assert verdict.matched_misconception is None


@pytest.mark.parametrize("check,answer,misconception", list(_cases("wrong")))
def test_wrong_answers_are_rejected_with_targeted_feedback(check, answer, misconception):
    verdict = grade(answer, SPECS[check])
    assert not verdict.correct, f"{check}: accepted a wrong answer: {answer!r}"
    assert verdict.matched_misconception == misconception, (answer, verdict)
    assert verdict.feedback.strip()
    if misconception is not None:
        rubric = SPECS[check].rubric
        expected = next(m.feedback for m in rubric.misconceptions if m.name == misconception)
        assert verdict.feedback == expected


def test_corpus_is_large_and_varied():
    for check in CHECKS:
        assert len(CORPUS[check]["right"]) >= 25, check
        assert len(CORPUS[check]["wrong"]) >= 25, check
        # every misconception of the rubric is exercised by at least one wrong answer
        named = {m for _, m in CORPUS[check]["wrong"] if m}
        assert named == {m.name for m in SPECS[check].rubric.misconceptions}, check


def test_lesson_examples_agree_with_the_grader():
    from tutor.course.loader import load_file

    lesson = load_file(LESSON)
    for check in CHECKS:
        step = lesson.step(check)
        assert 4 <= len(step.examples.right) <= 8 and 4 <= len(step.examples.wrong) <= 8, check
        for answer in step.examples.right:
            assert grade(answer, step.answer).correct, (check, answer)
        for answer in step.examples.wrong:
            assert not grade(answer, step.answer).correct, (check, answer)


def test_lesson_rubrics_have_no_lint_problems():
    from tutor.checks.text import lint_rubric

    for check in CHECKS:
        assert lint_rubric(SPECS[check].rubric) == [], check


def test_missing_feedback_names_what_is_missing_without_the_answer():
    spec = SPECS["check-3"]
    verdict = grade("It scales the gradients.", spec)
    assert not verdict.correct
    assert verdict.missing == ["underflow"]
    assert "underflow" not in verdict.feedback.lower()  # asks the question, does not give it away
    assert spec.reference not in verdict.feedback


def test_correct_answer_is_told_what_would_make_it_fuller():
    verdict = grade("so the gradients don't underflow in float16", SPECS["check-3"])
    assert verdict.correct
    assert "To go further" in verdict.feedback
    assert 0 < verdict.score < 1
