"""The `neuron` process group: torch.distributed's backend for the simulated device, data moved by gloo.

The real backend (S `torch_neuronx/distributed/backend.py`, S = parmoham-aws/test-repo-parmoham) registers
`ProcessGroupNeuron`, a Python subclass of `ProcessGroup`, as backend "neuron" for the `neuron` device, and
runs each collective as an XLA collective op over NeuronLink/EFA. Here the same registration and the same
rules (see `rules.py`, `runtime_setup.py`) sit over PyTorch's gloo (TCP, so several hosts work): a neuron
tensor's storage is host memory, so gloo works in place on a zero-copy CPU alias of it. Collectives run
to completion when issued (the simulated device is synchronous) and show in the profiler as
`neuron::<collective>` ranges whose arguments give the bytes they move.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (
    AllgatherOptions,
    AllreduceOptions,
    AllToAllOptions,
    BarrierOptions,
    BroadcastOptions,
    GatherOptions,
    ProcessGroup,
    ReduceOptions,
    ReduceScatterOptions,
    ScatterOptions,
    Work,
)

from neuronkit.device.simulator import native
from neuronkit.device.simulator.kernel import nbytes
from neuronkit.device.process_group import rules, runtime_setup
from neuronkit.device.process_group.trace import collective_range

BACKEND = "neuron"


def _host(tensor: torch.Tensor) -> torch.Tensor:
    """The CPU tensor gloo works on: a zero-copy alias of a neuron tensor's memory."""
    return native.to_cpu(tensor) if tensor.device.type == BACKEND else tensor


class _Staged:
    """CPU tensors for one collective. Outputs gloo cannot write in place (non-contiguous views) are staged
    in contiguous buffers and copied back by `finish`."""

    def __init__(self) -> None:
        self._outputs: list[torch.Tensor] = []
        self._host_outputs: list[torch.Tensor] = []
        self._writeback: list[tuple[torch.Tensor, torch.Tensor]] = []

    def input(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        return [_host(t).contiguous() for t in tensors]

    def output(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        staged = []
        for tensor in tensors:
            alias = _host(tensor)
            if not alias.is_contiguous():
                buffer = alias.contiguous()
                self._writeback.append((alias, buffer))
                alias = buffer
            staged.append(alias)
        self._outputs.extend(tensors)
        self._host_outputs.extend(staged)
        return staged

    def finish(self, work: Work, divide_by: int = 1) -> Work:
        """Wait for gloo (once: its Work may not be waited on twice), divide for an average, copy staged
        outputs back, and return a completed Work whose result is the caller's own (device) outputs, as
        DDP's reducer and the functional collectives expect."""
        work.wait()
        if divide_by != 1:
            for tensor in self._host_outputs:
                tensor.div_(divide_by)
        for alias, buffer in self._writeback:
            alias.copy_(buffer)
        return _completed(self._outputs)


def _scaled(tensors: list[torch.Tensor], factor: object) -> list[torch.Tensor]:
    """PREMUL_SUM's inputs multiplied by its factor (new tensors: the caller's inputs stay as they are)."""
    return tensors if factor is None else [t * factor for t in tensors]


class ProcessGroupNeuron(ProcessGroup):
    """`torch.distributed`'s process group for `neuron` tensors (and host tensors, which gloo moves as is)."""

    def __init__(self, store: dist.Store, rank: int, size: int, timeout: datetime.timedelta) -> None:
        super().__init__(rank, size)
        if runtime_setup.PLACEMENT is None:  # the first group is the default one (S: `_WORLD_SIZE is None`)
            runtime_setup.setup(rank, size, store)
        self._group_name = ""
        self._gloo = ProcessGroup(store, rank, size)
        gloo = dist.ProcessGroupGloo(dist.PrefixStore("neuronkit_gloo/", store), rank, size, timeout)
        self._gloo._register_backend(torch.device("cpu"), ProcessGroup.BackendType.GLOO, gloo)
        self._gloo._set_default_backend(ProcessGroup.BackendType.GLOO)

    # Identity, as the real class answers it.
    def getBackendName(self) -> str:  # noqa: N802 - ProcessGroup's name
        return BACKEND

    def _set_group_name(self, name: str) -> None:
        self._group_name = name
        self._gloo._set_group_name(f"{name}:neuronkit_gloo")

    @property
    def group_name(self) -> str:
        return self._group_name

    @property
    def _device_types(self) -> list[torch.device]:
        return [torch.device(BACKEND)]

    def _get_backend(self, device: torch.device) -> ProcessGroupNeuron:
        return self

    @property
    def supports_splitting(self) -> bool:
        """Asked by init_process_group(device_id=...). The real class returns itself as its backend and has
        no such attribute, so PyTorch fails there with an AttributeError; this says why in one line."""
        raise RuntimeError("init_process_group(device_id=...) fails with the neuron process group: "
                           "ProcessGroupNeuron has no supports_splitting (S torch_neuronx/distributed/backend.py); "
                           "leave device_id out, the group selects neuron:LOCAL_RANK itself")

    def _traced(self, kind: str, tensors: Sequence[torch.Tensor]):
        """The profiler range of one collective, with the bytes of `tensors` (the data it moves)."""
        return collective_range(kind, nbytes(tensors), self.size())

    def _summing(self, opts, cls) -> tuple[object, int, object]:
        """gloo has no AVG or PREMUL_SUM: options of type `cls` that SUM, the divisor that turns the sum into
        the average the caller asked for (1 otherwise) and the factor PREMUL_SUM multiplies the inputs by
        before summing (None otherwise), as S's process group does in all_reduce and reduce_scatter
        (S torch_neuronx/distributed/utils.py:63-89 `parse_and_update_inputs`, backend.py:528, 888, 971).
        The caller's options are left as they are."""
        fresh = cls()
        op = opts.reduceOp
        average, premul = op == dist.ReduceOp.AVG, op == dist.ReduceOp.PREMUL_SUM
        fresh.reduceOp = dist.ReduceOp.SUM if average or premul else op
        factor = op.__getstate__()[1] if premul else None
        if isinstance(factor, torch.Tensor):
            factor = _host(factor)
        return fresh, self.size() if average else 1, factor

    # Reductions.
    def allreduce(self, tensors: list[torch.Tensor], opts: AllreduceOptions | None = None) -> Work:
        gloo_opts, divide_by, factor = self._summing(opts or AllreduceOptions(), AllreduceOptions)
        rules.check_dtypes(tensors)
        with self._traced("all_reduce", tensors):
            staged = _Staged()
            host = staged.output(tensors)
            if factor is not None:
                for tensor in host:
                    tensor.mul_(factor)
            return staged.finish(self._gloo.allreduce(host, gloo_opts), divide_by)

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: AllreduceOptions | None = None) -> Work:
        return self._each(tensors, lambda t: self.allreduce([t], opts))

    def reduce(self, tensors: list[torch.Tensor], opts: ReduceOptions | None = None) -> Work:
        opts = opts or ReduceOptions()
        if opts.reduceOp == dist.ReduceOp.PREMUL_SUM:
            raise rules.premul_sum_not_modelled("reduce")
        rules.check_dtypes(tensors)
        with self._traced("reduce", tensors):
            staged = _Staged()
            return staged.finish(self._gloo.reduce(staged.output(tensors), opts))

    def reduce_scatter(self, outputs: list[torch.Tensor], inputs: list[list[torch.Tensor]],
                       opts: ReduceScatterOptions | None = None) -> Work:
        gloo_opts, divide_by, factor = self._summing(opts or ReduceScatterOptions(), ReduceScatterOptions)
        flat = [t for group in inputs for t in group]
        rules.check_dtypes(flat)
        with self._traced("reduce_scatter", flat):
            staged = _Staged()
            host_out = staged.output(outputs)
            host_in = [_scaled(staged.input(group), factor) for group in inputs]
            work = self._gloo.reduce_scatter(host_out, host_in, gloo_opts)
            return staged.finish(work, divide_by)

    def reduce_scatter_single(self, output: torch.Tensor, input: torch.Tensor,
                              opts: ReduceScatterOptions | None = None) -> Work:
        gloo_opts, divide_by, factor = self._summing(opts or ReduceScatterOptions(), ReduceScatterOptions)
        rules.check_dtypes([input])
        with self._traced("reduce_scatter", [input]):
            staged = _Staged()
            host_out = staged.output([output])
            host_in = _scaled(staged.input([input]), factor)[0]
            work = self._gloo.reduce_scatter_single(host_out[0], host_in, gloo_opts)
            return staged.finish(work, divide_by)

    _reduce_scatter_base = reduce_scatter_single  # the name the source and older PyTorch use

    def reduce_scatter_single_coalesced(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor],
                                        opts: ReduceScatterOptions | None = None) -> Work:
        return self._each(list(zip(outputs, inputs)), lambda p: self.reduce_scatter_single(p[0], p[1], opts))

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    def reduce_scatter_coalesced(self, *args: object) -> Work:
        raise rules.not_supported("reduce_scatter_coalesced")

    # Gathers and scatters.
    def allgather(self, outputs: list[list[torch.Tensor]], inputs: list[torch.Tensor],
                  opts: AllgatherOptions | None = None) -> Work:
        rules.check_dtypes(inputs)
        with self._traced("all_gather", [t for group in outputs for t in group]):
            staged = _Staged()
            host_out = [staged.output(group) for group in outputs]
            return staged.finish(self._gloo.allgather(host_out, staged.input(inputs), opts or AllgatherOptions()))

    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor,
                          opts: AllgatherOptions | None = None) -> Work:
        rules.check_dtypes([input])
        with self._traced("all_gather", [output]):
            staged = _Staged()
            return staged.finish(self._gloo.all_gather_single(
                staged.output([output])[0], staged.input([input])[0], opts or AllgatherOptions()))

    _allgather_base = all_gather_single

    def all_gather_single_coalesced(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor],
                                    opts: AllgatherOptions | None = None) -> Work:
        return self._each(list(zip(outputs, inputs)), lambda p: self.all_gather_single(p[0], p[1], opts))

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def allgather_coalesced(self, outputs: list[list[torch.Tensor]], inputs: list[torch.Tensor],
                            opts: AllgatherOptions | None = None) -> Work:
        return self._each(list(zip(outputs, inputs)), lambda p: self.allgather([p[0]], [p[1]], opts))

    def broadcast(self, tensors: list[torch.Tensor], opts: BroadcastOptions | None = None) -> Work:
        rules.check_dtypes(tensors)
        with self._traced("broadcast", tensors):
            staged = _Staged()
            return staged.finish(self._gloo.broadcast(staged.output(tensors), opts or BroadcastOptions()))

    def gather(self, outputs: list[list[torch.Tensor]], inputs: list[torch.Tensor],
               opts: GatherOptions | None = None) -> Work:
        rules.check_dtypes(inputs)
        with self._traced("gather", inputs):
            staged = _Staged()
            host_out = [staged.output(group) for group in outputs]
            return staged.finish(self._gloo.gather(host_out, staged.input(inputs), opts or GatherOptions()))

    def scatter(self, outputs: list[torch.Tensor], inputs: list[list[torch.Tensor]],
                opts: ScatterOptions | None = None) -> Work:
        rules.check_dtypes(outputs)
        with self._traced("scatter", outputs):
            staged = _Staged()
            host_in = [staged.input(group) for group in inputs]
            return staged.finish(self._gloo.scatter(staged.output(outputs), host_in, opts or ScatterOptions()))

    def alltoall(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor],
                 opts: AllToAllOptions | None = None) -> Work:
        rules.check_all_to_all(self.size(), dist.get_world_size())
        rules.check_dtypes(inputs)
        with self._traced("all_to_all", inputs):
            staged = _Staged()
            sent = torch.cat([t.reshape(-1) for t in staged.input(inputs)])
            received = torch.empty(sum(t.numel() for t in outputs), dtype=sent.dtype)
            self._gloo.all_to_all_single(
                received, sent, [t.numel() for t in outputs], [t.numel() for t in inputs],
                opts or AllToAllOptions()).wait()
            for out, chunk in zip(outputs, received.split([t.numel() for t in outputs])):
                _host(out).copy_(chunk.view(out.shape))
            return _completed(outputs)

    def all_to_all_single(self, output: torch.Tensor, input: torch.Tensor, output_split_sizes: list[int],
                          input_split_sizes: list[int], opts: AllToAllOptions | None = None) -> Work:
        rules.check_splits(output_split_sizes, "output", self.size())
        rules.check_splits(input_split_sizes, "input", self.size())
        rules.check_all_to_all(self.size(), dist.get_world_size())
        rules.check_dtypes([input])
        with self._traced("all_to_all", [input]):
            staged = _Staged()
            return staged.finish(self._gloo.all_to_all_single(
                staged.output([output])[0], staged.input([input])[0], output_split_sizes, input_split_sizes,
                opts or AllToAllOptions()))

    alltoall_base = all_to_all_single

    # Synchronisation and point to point.
    def barrier(self, opts: BarrierOptions | None = None) -> Work:
        if dist.get_world_size() != self.size():
            raise NotImplementedError(f"Barrier is implemented only for default group, called barrier on a group "
                                      f"of {self.size()} ranks (S torch_neuronx/distributed/backend.py, barrier)")
        with self._traced("barrier", []):
            self._gloo.barrier(BarrierOptions()).wait()  # gloo waits on the host, not on opts.device
        return _completed()

    def send(self, tensors: list[torch.Tensor], dst: int, tag: int = 0) -> Work:
        rules.check_dtypes(tensors)
        with self._traced("send", tensors):
            self._gloo.send(_Staged().input(tensors), dst, tag).wait()
        return _completed()

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int = 0) -> Work:
        rules.check_dtypes(tensors)
        with self._traced("recv", tensors):
            staged = _Staged()
            return staged.finish(self._gloo.recv(staged.output(tensors), src, tag))

    def recv_anysource(self, *args: object) -> Work:
        raise rules.not_supported("recv_anysource")

    def monitored_barrier(self, *args: object) -> Work:
        raise rules.not_supported("monitored_barrier")

    def _each(self, items: Sequence, run) -> Work:
        """Coalesced collectives, one after the other (gloo has no coalesced kernels)."""
        work = None
        for item in items:
            work = run(item)
        return work if work is not None else _completed()


def _completed(outputs: list[torch.Tensor] | None = None) -> Work:
    """A finished Work whose future holds `outputs` (gloo's own Work may not be waited on twice): a device
    future, as S's process group returns, so a callback chained on it (`Future.then`, every DDP communication
    hook) asks the device for a pooled stream, which it refuses (csrc/device.cpp getStreamFromGlobalPool)."""
    devices = sorted({str(t.device) for t in outputs or () if isinstance(t, torch.Tensor) and t.device.type == "neuron"})
    future: torch.futures.Future = torch.futures.Future(devices=devices)
    future.set_result(outputs or [])
    return torch._C._distributed_c10d._create_work_from_future(future)


def register() -> None:
    """Register backend "neuron" for the `neuron` device, as the real package does on import, so a bare
    `init_process_group()` on a neuron rank picks it (S backend.py `_register_neuron_backend`)."""
    if BACKEND.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND, ProcessGroupNeuron, devices=[BACKEND])
