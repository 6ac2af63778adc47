#!/usr/bin/python3
"""The benchmarks' reference: PyTorch (Python) on Fashion-MNIST, one process or DDP over gloo.

Every throughput figure in tests/bench is a ratio of dtrain to this script, run in the same
benchmark run with the same model, batch size per worker, number of workers, threads and
network conditions. It uses Debian's python3-torch (the build that libtorch-dev is), so the
kernels are the ones dtrain's workers call.

Models (--network), the same layers, shapes and parameter order as dtrain's (common/models):
  lenet   MXNet's example/image-classification LeNet: conv 20 -> conv 50 -> fc 500 -> fc 10,
          tanh and max-pool. --lenet-layout dtrain runs it as dtrain does (pool before tanh,
          on channels-last activations: the same values, less compute), so that a ratio
          against it is the system's and not the model code's.
  mlp     MXNet's mlp shape with relu; --hidden 2048,2048 makes a communication-bound model.
  resnet  CIFAR-style ResNet-(6n+2) (--num-layers): basic blocks, 1x1 conv + BN projection
          shortcuts, 16/32/64 channels, global average pooling.

Usage:
  torch_reference.py [--world N] [--epochs E] [--batch B] [--threads T] [--data DIR]
                     [--network lenet|mlp|resnet] [--hidden 2048,2048] [--num-layers 20]
                     [--lr LR] [--mom M] [--num-examples N] [--lenet-layout mxnet|dtrain]
  All ranks from one process: --world N (spawns them; rendezvous on 127.0.0.1).
  One rank per process (e.g. each in its own network namespace):
  torch_reference.py --world N --rank R --master HOST:PORT [...]

--device cuda trains on the GPU (one process; --world 1), as dtrain's `--gpus 0` does: each
batch is taken from the data set in host memory and copied to the GPU, and cuDNN is made
deterministic with its autotuner off, as dtrain's GPU workers are.

Prints one JSON line (rank 0): training samples/s of all ranks together, training seconds,
each epoch's samples/s (the first includes warm-up, e.g. CUDA's start), test accuracy and the
model's size in bytes.
"""
import argparse
import gzip
import json
import os
import struct
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


def load_idx(path):
    """One IDX file (gzip) as a numpy array of its declared shape."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    (magic,) = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


class LeNet(nn.Module):
    def __init__(self, layout):
        super().__init__()
        self.layout = layout
        self.c1 = nn.Conv2d(1, 20, 5)
        self.c2 = nn.Conv2d(20, 50, 5)
        self.f1 = nn.Linear(50 * 4 * 4, 500)
        self.f2 = nn.Linear(500, 10)

    def forward(self, x):
        if self.layout == "dtrain":
            # max-pool commutes with tanh (both monotonic): a quarter of the tanh work.
            cl = torch.channels_last
            x = torch.tanh(F.max_pool2d(self.c1(x).contiguous(memory_format=cl), 2))
            x = torch.tanh(F.max_pool2d(self.c2(x).contiguous(memory_format=cl), 2))
        else:
            x = F.max_pool2d(torch.tanh(self.c1(x)), 2)
            x = F.max_pool2d(torch.tanh(self.c2(x)), 2)
        return self.f2(torch.tanh(self.f1(x.flatten(1))))


class MLP(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        sizes = [784] + hidden
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))
        self.out = nn.Linear(sizes[-1], 10)

    def forward(self, x):
        x = x.flatten(1)
        for layer in self.layers:
            x = F.relu(layer(x))
        return self.out(x)


class Block(nn.Module):
    """He et al. 2016 basic block; a 1x1 conv + BN projection when the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.proj = None
        if stride != 1 or cin != cout:
            self.proj = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        return F.relu(y + (x if self.proj is None else self.proj(x)))


class ResNet(nn.Module):
    """CIFAR-style ResNet-(6n+2): 3 stages of n blocks, 16/32/64 channels."""

    def __init__(self, layers, in_ch=1, classes=10):
        super().__init__()
        n = (layers - 2) // 6
        self.stem = nn.Sequential(nn.Conv2d(in_ch, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        blocks, cin = [], 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(n):
                blocks.append(Block(cin, cout, stride if i == 0 else 1))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def build_model(a):
    if a.network == "lenet":
        return LeNet(a.lenet_layout)
    if a.network == "mlp":
        return MLP([int(h) for h in a.hidden.split(",")])
    return ResNet(a.num_layers)


def run(rank, a):
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    dev = torch.device(a.device)
    if dev.type == "cuda":
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
    if a.world > 1:
        host, port = (a.master or "127.0.0.1:29511").rsplit(":", 1)
        os.environ["MASTER_ADDR"] = host
        os.environ["MASTER_PORT"] = port
        dist.init_process_group("gloo", rank=rank, world_size=a.world)
    images = lambda name: torch.from_numpy(load_idx(f"{a.data}/{name}").astype(np.float32) / 255.0).unsqueeze(1)
    labels = lambda name: torch.from_numpy(load_idx(f"{a.data}/{name}").astype(np.int64))
    X, Y = images("train-images-idx3-ubyte.gz"), labels("train-labels-idx1-ubyte.gz")
    Xt, Yt = images("t10k-images-idx3-ubyte.gz"), labels("t10k-labels-idx1-ubyte.gz")
    if a.num_examples:
        X, Y = X[:a.num_examples], Y[:a.num_examples]
    X, Y = X[rank::a.world], Y[rank::a.world]
    model = build_model(a).to(dev)
    model_bytes = sum(p.numel() * 4 for p in model.parameters())
    if a.world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.mom, weight_decay=1e-4)
    n = (len(X) // a.batch) * a.batch
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    t0 = time.time()
    seen = 0
    epoch_speeds = []
    for _ in range(a.epochs):
        e0, e_seen = time.time(), 0
        perm = torch.randperm(len(X))
        for i in range(0, n, a.batch):
            idx = perm[i:i + a.batch]
            opt.zero_grad()
            F.cross_entropy(model(X[idx].to(dev)), Y[idx].to(dev)).backward()
            opt.step()
            e_seen += len(idx)
        sync()
        seen += e_seen
        epoch_speeds.append(round(e_seen * a.world / max(1e-9, time.time() - e0), 1))
    train_s = time.time() - t0
    model.eval()
    with torch.no_grad():
        correct = sum((model(Xt[i:i + 1000].to(dev)).argmax(1).cpu() == Yt[i:i + 1000]).sum().item()
                      for i in range(0, len(Xt), 1000))
        acc = correct / len(Xt)
    if rank == 0:
        print(json.dumps({"world": a.world, "network": a.network, "epochs": a.epochs, "batch_per_worker": a.batch,
                          "threads": a.threads, "model_bytes": model_bytes,
                          "samples_per_s_total": round(seen * a.world / train_s, 1), "train_s": round(train_s, 2),
                          "epoch_samples_per_s": epoch_speeds, "device": a.device,
                          "test_acc": round(acc, 4)}), flush=True)
    if a.world > 1:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--world", type=int, default=1)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64, help="per rank, as dtrain's --batch-size")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--mom", type=float, default=0.9)
    p.add_argument("--network", choices=["lenet", "mlp", "resnet"], default="lenet")
    p.add_argument("--lenet-layout", choices=["mxnet", "dtrain"], default="mxnet",
                   help="LeNet's layer order: MXNet's (tanh then pool) or dtrain's (pool then tanh, channels-last)")
    p.add_argument("--num-layers", type=int, default=20, help="resnet depth 6n+2")
    p.add_argument("--hidden", default="128,64")
    p.add_argument("--num-examples", type=int, default=0)
    p.add_argument("--rank", type=int, default=-1, help="run only this rank (with --master); else spawn all")
    p.add_argument("--master", default="", help="HOST:PORT of rank 0's rendezvous")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--device", default="cpu", help="cpu, or cuda (one process: --world 1)")
    a = p.parse_args()
    if a.device != "cpu" and a.world != 1:
        p.error("--device cuda runs one process: --world 1")
    if a.world < 1 or a.batch < 1 or a.threads < 1 or a.epochs < 0:
        p.error("--world, --batch and --threads must be at least 1, --epochs at least 0")
    if a.network == "resnet" and (a.num_layers - 2) % 6 != 0:
        p.error(f"--num-layers {a.num_layers}: a CIFAR ResNet has 6n+2 layers (20, 32, 44, 56, 110)")
    if a.world == 1:
        run(0, a)
    elif a.rank >= 0:
        run(a.rank, a)
    else:
        mp.spawn(run, args=(a,), nprocs=a.world)


if __name__ == "__main__":
    main()
