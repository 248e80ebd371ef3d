"""The seed article's user snippets, verbatim, on the simulated device after a bare `import torch`."""

from __future__ import annotations

import torch
import torch.nn as nn
from conftest import TINY_QWEN3


class MyModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def test_seed_training_loop_runs_unchanged():
    torch.manual_seed(0)
    dataloader = [torch.randn(8, 16).to("neuron") for _ in range(4)]
    targets = torch.randint(0, 4, (8,)).to("neuron")
    criterion = nn.CrossEntropyLoss()
    # --- seed article, verbatim ---
    model = MyModel().to('neuron')   # the only change
    optimizer = torch.optim.AdamW(model.parameters())
    for batch in dataloader:
        optimizer.zero_grad()
        loss = criterion(model(batch), targets)
        loss.backward()
        optimizer.step()
    # ---
    assert all(p.device.type == "neuron" for p in model.parameters())
    assert all(p.grad is not None and p.grad.device.type == "neuron" for p in model.parameters())
    assert torch.isfinite(loss).item()


def test_seed_training_loop_matches_cpu():
    torch.manual_seed(0)
    cpu_model = MyModel()
    neuron_model = MyModel()
    neuron_model.load_state_dict(cpu_model.state_dict())
    neuron_model.to("neuron")
    batch, targets = torch.randn(8, 16), torch.randint(0, 4, (8,))
    losses = {}
    for name, model, device in (("cpu", cpu_model, "cpu"), ("neuron", neuron_model, "neuron")):
        optimizer = torch.optim.AdamW(model.parameters())
        for _ in range(3):
            optimizer.zero_grad()
            loss = nn.CrossEntropyLoss()(model(batch.to(device)), targets.to(device))
            loss.backward()
            optimizer.step()
        losses[name] = loss.item()
    assert abs(losses["cpu"] - losses["neuron"]) < 1e-5


def test_seed_from_pretrained_device_map_neuron_then_generate():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # The seed loads "Qwen/Qwen3-0.6B" from the Hub; offline, the bundled tiny Qwen3 stands in for it.
    model = AutoModelForCausalLM.from_pretrained(
        str(TINY_QWEN3),
        # Neuron hardware is automatically detected
        device_map="neuron"
    )
    tokenizer = AutoTokenizer.from_pretrained(str(TINY_QWEN3))
    assert {p.device for p in model.parameters()} == {torch.device("neuron", 0)}
    # tied embeddings stay tied on the device
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    prompt = tokenizer("Shapes matter on Trainium.", return_tensors="pt")
    on_neuron = model.generate(**prompt.to("neuron"), max_new_tokens=8, do_sample=False)
    reference = AutoModelForCausalLM.from_pretrained(str(TINY_QWEN3)).generate(
        **tokenizer("Shapes matter on Trainium.", return_tensors="pt"), max_new_tokens=8, do_sample=False)
    assert on_neuron.device.type == "neuron"
    assert torch.equal(on_neuron.cpu(), reference)


SEED_OP_INVENTORY = '''
# op_inventory.py —— 迁移前先看看你的模型到底碰了哪些 aten 算子
import torch, torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode

class OpInventory(TorchDispatchMode):
    def __init__(self):
        self.seen = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        key = str(func)                       # 例如 aten.gelu.default
        self.seen[key] = self.seen.get(key, 0) + 1
        return func(*args, **(kwargs or {}))

model = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.LayerNorm(64))
inv = OpInventory()
with inv:                                    # 这里的每一次算子调用都会被记录
    model(torch.randn(8, 64))

for name, n in sorted(inv.seen.items(), key=lambda kv: -kv[1]):
    print(f"{n:5d}  {name}")
'''


def test_seed_op_inventory_runs_verbatim_and_on_the_device(capsys):
    scope: dict = {}
    exec(compile(SEED_OP_INVENTORY, "op_inventory.py", "exec"), scope)  # the article's script, as printed
    printed = capsys.readouterr().out
    assert "aten.gelu.default" in printed and "aten.addmm.default" in printed
    # The same inventory with the model moved to the device: the dispatch mode sees the same aten ops.
    model, inv = scope["model"].to("neuron"), scope["OpInventory"]()
    with inv:
        out = model(torch.randn(8, 64).to("neuron"))
    assert out.device.type == "neuron"
    assert {"aten.addmm.default", "aten.gelu.default", "aten.native_layer_norm.default"} <= set(inv.seen)
