"""Hugging Face clients as released (transformers, accelerate) on the simulated device, tiny and offline, with
parity against the CPU where the client is deterministic (issue 24: the upstream stack needs no fork)."""

from __future__ import annotations

import pytest
import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState

from neuronkit import client_paths
from neuronkit.models import load_model
from neuronkit.resources import data_dir

pytestmark = pytest.mark.usefixtures("fresh_dynamo")
STEPS = 3


class _Tokens(torch.utils.data.Dataset):
    """Eight fixed sequences of 16 tokens, their own labels (a causal-LM batch)."""

    def __init__(self) -> None:
        self.ids = torch.randint(100, (8, 16), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[index], "labels": self.ids[index]}


def _train(tmp_path, on_cpu: bool, **options) -> tuple[list[float], str]:
    """Three Trainer steps of the bundled tiny Qwen3; the logged losses and the device Trainer chose."""
    # imported here, not at the top: transformers' Trainer pulls in peft, datasets and pandas (~0.5 CPU-s), which
    # every pytest-xdist worker paid collecting this module although one worker runs its tests
    from transformers import Trainer, TrainingArguments

    torch.manual_seed(0)
    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=4, max_steps=STEPS,
                             logging_steps=1, report_to=[], save_strategy="no", use_cpu=on_cpu, learning_rate=1e-3,
                             seed=0, disable_tqdm=True, **options)
    trainer = Trainer(model=load_model("tiny-qwen3").train(), args=args, train_dataset=_Tokens())
    trainer.train()
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry], str(args.device)


@pytest.fixture(scope="module", autouse=True)
def _accelerate_state_reset():
    """Trainer keeps accelerate's process-wide state (device, mixed precision): no later test inherits it."""
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


@pytest.fixture(scope="module")
def cpu_losses(tmp_path_factory) -> list[float]:
    return _train(tmp_path_factory.mktemp("cpu"), on_cpu=True)[0]


@pytest.mark.parametrize("options", [{}, {"torch_compile": True, "torch_compile_backend": "neuron"}],
                         ids=["eager", "compile"])
def test_trainer_picks_the_neuron_device_and_matches_the_cpu(tmp_path, cpu_losses, options):
    losses, device = _train(tmp_path, on_cpu=False, **options)
    assert device == "neuron:0" and len(losses) == STEPS
    assert losses == pytest.approx(cpu_losses, abs=1e-4)
    if options:
        assert torch.neuron.get_dynamo_metrics(), "the neuron backend compiled nothing"


def test_trainer_in_bfloat16_trains(tmp_path, cpu_losses):
    losses, device = _train(tmp_path, on_cpu=False, bf16=True)
    assert device == "neuron:0" and losses[-1] < losses[0]
    assert losses == pytest.approx(cpu_losses, abs=0.1)  # bf16 autocast: close to float32, not equal


def test_accelerate_in_one_process_trains_like_the_cpu():
    AcceleratorState._reset_state(reset_partial_state=True)  # Trainer's bf16 run left its mixed precision behind
    accelerator = Accelerator(mixed_precision="no")
    assert accelerator.device.type == "neuron"
    batch = _Tokens().ids[:4]
    results = []
    for device in (accelerator.device, torch.device("cpu")):
        torch.manual_seed(0)
        model = load_model("tiny-qwen3").train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        if device.type == "neuron":
            model, optimizer = accelerator.prepare(model, optimizer)
        else:
            model = model.to(device)
        loss = model(input_ids=batch.to(device), labels=batch.to(device)).loss
        accelerator.backward(loss) if device.type == "neuron" else loss.backward()
        optimizer.step()
        results.append(model(input_ids=batch.to(device), labels=batch.to(device)).loss.item())
    assert results[0] == pytest.approx(results[1], abs=1e-4)


def test_generate_with_a_static_cache_matches_the_cpu():
    model = load_model("tiny-qwen3")
    prompt = torch.randint(100, (1, 6), generator=torch.Generator().manual_seed(0))
    on_cpu = model.generate(prompt, max_new_tokens=5, do_sample=False, cache_implementation="static")
    on_device = model.to("neuron").generate(prompt.to("neuron"), max_new_tokens=5, do_sample=False,
                                            cache_implementation="static")
    assert on_device.device.type == "neuron" and torch.equal(on_device.cpu(), on_cpu)


def test_pipeline_runs_on_neuron_when_told_and_on_the_cpu_by_default():
    """`pipeline(..., device="neuron")` generates what the CPU does; without a device (the finding
    transformers/pipeline_default_device) it takes the CPU, and moves a model on neuron back there."""
    from transformers import AutoTokenizer, pipeline

    path = str(data_dir() / "models" / "tiny-qwen3")
    texts = {}
    for device in ("cpu", "neuron"):
        generator = pipeline("text-generation", model=path, device=device)
        assert generator.model.device.type == device
        texts[device] = generator("The device", max_new_tokens=5, do_sample=False)[0]["generated_text"]
    assert texts["neuron"] == texts["cpu"] and len(texts["cpu"]) > len("The device")
    assert pipeline("text-generation", model=path).device.type == "cpu"
    model = load_model("tiny-qwen3").to("neuron")
    pipeline("text-generation", model=model, tokenizer=AutoTokenizer.from_pretrained(path))
    assert model.device.type == "cpu"
    assert "device=-1" in client_paths.find("transformers", "pipeline_default_device").remedy
    model.to("neuron")
    assert pipeline("text-generation", model=model, tokenizer=AutoTokenizer.from_pretrained(path),
                    device=-1).device.type == "neuron"
