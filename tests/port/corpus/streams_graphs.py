"""Port corpus: streams, events, CUDA graphs, torch.compile modes, NVTX."""
import torch

side = torch.cuda.Stream()  # expect: streams
with torch.cuda.stream(side):  # expect: streams
    pass
torch.cuda.current_stream().wait_stream(side)  # expect: streams
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)  # expect: event event
g = torch.cuda.CUDAGraph()  # expect: cuda-graphs
with torch.cuda.graph(g):  # expect: cuda-graphs
    pass
step = torch.cuda.make_graphed_callables(torch.nn.Linear(2, 2), (torch.ones(1, 2),))  # expect: cuda-graphs
fast = torch.compile(torch.nn.Linear(2, 2), mode="reduce-overhead")  # expect: compile-mode
tuned = torch.compile(torch.nn.Linear(2, 2), mode="max-autotune")  # expect: compile-mode
plain = torch.compile(torch.nn.Linear(2, 2), mode="default")
torch.cuda.nvtx.range_push("step")  # expect: nvtx
torch.cuda.nvtx.range_pop()  # expect: nvtx
