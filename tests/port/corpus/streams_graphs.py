"""Port corpus: streams, events, CUDA graphs, torch.compile modes, NVTX."""
import torch

side = torch.cuda.Stream()  # expect: stream
with torch.cuda.stream(side):  # expect: stream-context
    pass
torch.cuda.current_stream().wait_stream(side)  # expect: current-stream
torch.cuda.set_stream(torch.cuda.default_stream())  # expect: set-stream default-stream
low = torch.cuda.Stream(priority=-1)  # expect: stream
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)  # expect: event event
g = torch.cuda.CUDAGraph()  # expect: cuda-graphs
with torch.cuda.graph(g):  # expect: cuda-graphs
    pass
step = torch.cuda.make_graphed_callables(torch.nn.Linear(2, 2), (torch.ones(1, 2),))  # expect: cuda-graphs
fast = torch.compile(torch.nn.Linear(2, 2), mode="reduce-overhead")  # expect: compile-mode compile-backend
tuned = torch.compile(torch.nn.Linear(2, 2), mode="max-autotune")  # expect: compile-mode compile-backend
plain = torch.compile(torch.nn.Linear(2, 2), mode="default")  # expect: compile-backend
named = torch.compile(torch.nn.Linear(2, 2), backend="neuron")
inductor = torch.compile(torch.nn.Linear(2, 2), backend="inductor")  # expect: compile-backend-inductor
torch.cuda.nvtx.range_push("step")  # expect: nvtx
torch.cuda.nvtx.range_pop()  # expect: nvtx
