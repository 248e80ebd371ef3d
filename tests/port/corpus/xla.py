"""Port corpus: PyTorch/XLA (torch-neuronx 2.x) idioms, each with its native rewrite, decision or blocker."""
import os

import torch
import torch.distributed as dist
import torch_neuronx
import torch_xla  # expect: xla-import
import torch_xla.core.xla_model as xm  # expect: xla-import
import torch_xla.debug.metrics as met  # expect: xla-import
import torch_xla.distributed.parallel_loader as pl  # expect: xla-import
import torch_xla.distributed.xla_backend  # expect: xla-import
import torch_xla.distributed.xla_multiprocessing as xmp  # expect: xla-import
import torch_xla.runtime as xr  # expect: xla-import
from neuronx_distributed.parallel_layers import ColumnParallelLinear, RowParallelLinear, parallel_state  # expect: nxd-parallel-layers nxd-parallel-layers nxd-parallel-state
from neuronx_distributed.trainer import neuronx_distributed_config  # noqa: F401  # expect: nxd-unknown
from torch_xla.amp import syncfree  # expect: xla-import

os.environ["XLA_USE_BF16"] = "1"  # expect: xla-bf16-env
os.environ["PJRT_DEVICE"] = "NEURON"  # expect: xla-env


class ParallelMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = ColumnParallelLinear(16, 64, gather_output=False)  # expect: nxd-parallel-layers
        self.down = RowParallelLinear(64, 16, input_is_parallel=True)  # expect: nxd-parallel-layers


def _mp_fn(index, loader):
    dist.init_process_group("xla", init_method="xla://")  # expect: xla-string xla-init-method
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=2)  # expect: nxd-parallel-state
    device = xm.xla_device()  # expect: xla-device
    other = torch_xla.device()  # expect: xla-device
    model = torch.nn.Linear(4, 4).to("xla")  # expect: xla-string
    optimizer = syncfree.AdamW(model.parameters())  # expect: xla-amp
    for batch in pl.MpDeviceLoader(loader, device):  # expect: mp-device-loader
        loss = model(batch).sum()
        loss.backward()
        xm.reduce_gradients(optimizer)  # expect: reduce-gradients
        xm.optimizer_step(optimizer)  # expect: optimizer-step
        xm.mark_step()  # expect: mark-step
        xm.add_step_closure(print, args=(loss,))  # expect: add-step-closure
        xm.master_print(loss)  # expect: master-print
    for batch in pl.ParallelLoader(loader, [device]).per_device_loader(device):  # expect: parallel-loader
        pass
    if device.type == "xla":  # expect: xla-check
        xm.wait_device_ops()  # expect: wait-device-ops
    print(xm.get_ordinal(), xm.get_local_ordinal(), xm.xrt_world_size())  # expect: ordinal local-ordinal world-size
    print(xr.global_ordinal(), xr.world_size())  # expect: ordinal world-size
    total = xm.all_reduce(xm.REDUCE_SUM, loss)  # expect: xla-collectives xla-unknown
    xm.rendezvous("end")  # expect: rendezvous
    if xm.is_master_ordinal():  # expect: is-master
        xm.save(model.state_dict(), "model.pt")  # expect: xla-save
    print(met.metrics_report(), xm.xla_device_kind())  # expect: xla-metrics xla-device-info
    print(xm.get_memory_info(device), other, total)  # expect: xla-unknown
    traced = torch_neuronx.trace(model, torch.ones(4))  # expect: neuronx-trace
    print(traced)
    torch_neuronx.analyze(model, torch.ones(4))  # expect: neuronx-xla-era


if __name__ == "__main__":
    xmp.spawn(_mp_fn, args=([],), nprocs=2)  # expect: xmp-spawn
