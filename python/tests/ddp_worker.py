"""One rank of test_torch.py's DDP test: trains one step of the tiny BERT
wrapped in DistributedDataParallel (gloo) and compiled with remat.torch on
its half of the batch, and saves its gradients.
    ddp_worker.py RANK WORLD PORT OUT_DIR
"""
import os
import pathlib
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import remat.torch  # noqa: E402
from test_torch import make_batch, make_model  # noqa: E402


def main():
    rank, world, port, out = (int(sys.argv[1]), int(sys.argv[2]),
                              sys.argv[3], pathlib.Path(sys.argv[4]))
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = port
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model = make_model("bert")
    ids, labels = make_batch(batch=4, seq=16)
    share = ids.shape[0] // world
    part = slice(rank * share, (rank + 1) * share)
    ddp = remat.torch.compile(DistributedDataParallel(model), budget="99%")
    ddp(ids[part], labels[part]).backward()
    grads = {name: p.grad for name, p in model.named_parameters()
             if p.grad is not None}
    torch.save(grads, out / ("grads%d.pt" % rank))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
