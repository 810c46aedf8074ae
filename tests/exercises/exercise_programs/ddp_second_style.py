"""DDP-ready training written another way: the rank from the process group rather than the
environment, a sampler told its replicas and rank, the model unwrapped with getattr, a barrier
before the group ends. It must pass exactly as the lesson's solution does."""

import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from tutor.lab import MNISTClassifier, evaluate, report, test_set, train_set

gpus = torch.cuda.device_count()
use_cuda = gpus >= int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
dist.init_process_group(backend="nccl" if use_cuda else "gloo")
me, everyone = dist.get_rank(), dist.get_world_size()
dev = torch.device(f"cuda:{me % max(gpus, 1)}" if use_cuda else "cpu")

net = MNISTClassifier().to(dev)
ddp_net = DistributedDataParallel(net, device_ids=[dev.index] if use_cuda else None)
shards = DistributedSampler(train_set, num_replicas=everyone, rank=me, shuffle=True, seed=7)
batches = DataLoader(train_set, batch_size=100, sampler=shards, drop_last=False)
opt = torch.optim.SGD(ddp_net.parameters(), lr=0.05, momentum=0.9)

for ep in range(1, 3):
    shards.set_epoch(ep)
    for xb, yb in batches:
        xb, yb = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(ddp_net(xb), yb).backward()
        opt.step()

plain = getattr(ddp_net, "module", ddp_net)
if dist.get_rank() == 0:
    acc = evaluate(plain, DataLoader(test_set, batch_size=500), dev)
    os.makedirs("saved_models", exist_ok=True)
    torch.save({"model_state_dict": plain.state_dict(), "epochs": 2}, "saved_models/ddp.pth")
    report(accuracy=acc)
dist.barrier()
dist.destroy_process_group()
