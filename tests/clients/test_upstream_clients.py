"""PEFT, trl and Diffusers as released on the simulated device, tiny and offline, with parity against the CPU
(issue 24). Installed by `make setup` (pyproject's `clients` group)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neuronkit import client_paths
from neuronkit.models import load_model
from neuronkit.policy import torch_at_least

BATCH = torch.randint(100, (4, 16), generator=torch.Generator().manual_seed(0))


def test_peft_lora_trains_and_merges_like_the_cpu():
    from peft import LoraConfig, get_peft_model
    results = {}
    for device in ("cpu", "neuron"):
        torch.manual_seed(0)
        config = LoraConfig(r=4, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
        model = get_peft_model(load_model("tiny-qwen3").train(), config).to(device)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
        ids = BATCH.to(device)
        for _ in range(2):
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        merged = model.merge_and_unload()
        results[device] = (loss.item(), merged(input_ids=ids, labels=ids).loss.item())
    assert results["neuron"] == pytest.approx(results["cpu"], abs=1e-4)


def test_trl_sft_trainer_picks_the_device_and_matches_the_cpu(tmp_path):
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer
    data = Dataset.from_dict({"input_ids": BATCH.repeat(2, 1).tolist()})
    runs = {}
    for on_cpu in (True, False):
        torch.manual_seed(0)
        config = SFTConfig(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=4, logging_steps=1,
                           report_to=[], save_strategy="no", use_cpu=on_cpu, learning_rate=1e-3, disable_tqdm=True,
                           seed=0)
        trainer = SFTTrainer(model=load_model("tiny-qwen3").train(), args=config, train_dataset=data)
        trainer.train()
        runs[str(config.device)] = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert set(runs) == {"cpu", "neuron:0"}
    assert runs["neuron:0"] == pytest.approx(runs["cpu"], abs=2e-3)


def _unet(attention: bool = False):
    from diffusers import UNet2DModel
    torch.manual_seed(0)
    blocks = (("DownBlock2D", "AttnDownBlock2D"), ("AttnUpBlock2D", "UpBlock2D")) if attention else (
        ("DownBlock2D", "DownBlock2D"), ("UpBlock2D", "UpBlock2D"))
    return UNet2DModel(sample_size=8, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(32, 32),
                       norm_num_groups=8, down_block_types=blocks[0], up_block_types=blocks[1])


def _group_norms_the_device_cannot_take(unet, sample) -> list[str]:
    """The GroupNorm layers, in call order, whose input the device's native_group_norm cannot take, found on a
    CPU run under the running torch: a PrivateUse1 tensor runs torch's generic kernel (math_group_norm; S
    registers none), which views what F.group_norm hands it as (batch, groups, -1). What F.group_norm hands it
    depends on torch, so it is observed, not assumed: torch 2.13's first copies the input to its suggested
    memory format (for the CPU and PrivateUse1 alike), which rescues the mid block's batch-1 attention output;
    torch 2.14's passes the input as it is (PyTorch PR #186414 moved the copy into the CPU and CUDA kernels)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Handed(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.native_group_norm.default:
                self.input = args[0]
            return func(*args, **(kwargs or {}))

    found = []

    def probe(module, args, name):
        with Handed() as handed:
            torch.nn.functional.group_norm(args[0], module.num_groups, module.weight, module.bias, module.eps)
        try:
            handed.input.view(handed.input.shape[0], module.num_groups, -1)
        except RuntimeError:
            found.append(name)

    hooks = [module.register_forward_pre_hook(lambda m, args, name=name: probe(m, args, name))
             for name, module in unet.named_modules() if isinstance(module, torch.nn.GroupNorm)]
    with torch.no_grad():
        unet(sample, 10)
    for hook in hooks:
        hook.remove()
    return found


def _contiguous_group_norm_inputs(unet) -> None:
    """The finding's remedy: every GroupNorm gets a contiguous input."""
    for module in unet.modules():
        if isinstance(module, torch.nn.GroupNorm):
            module.register_forward_pre_hook(lambda _, args: (args[0].contiguous(),))


def _eager_stage(unet, sample):
    import neuronkit
    report = neuronkit.check(unet, {"sample": sample, "timestep": torch.tensor([10])}, stages=["eager"])
    return next(stage for stage in report.stages if stage.stage == "eager")


def _assert_the_group_norm_finding(eager, layer: str) -> None:
    finding = client_paths.find("diffusers", "group_norm_channels_last")
    assert eager.status == "error" and f"diffusers path: GroupNorm fails on a channels-last-strided tensor in {layer}" \
        in eager.summary
    assert "[client:group_norm_channels_last]" in eager.summary and finding.remedy in eager.summary


def test_diffusers_unet_without_attention_and_ddpm_pipeline_match_the_cpu():
    """A UNet2DModel with no attention down or up block still has the default mid block's attention. Under
    torch 2.13 its batch-1 output reaches the next GroupNorm as a copy and the UNet and a DDPM pipeline run
    as on the CPU; under torch 2.14 F.group_norm hands it over as it is and the device meets the GroupNorm
    finding there (neuronkit/data/client_paths.toml), which `check` names, and with its remedy both match the
    CPU. Which one the running torch does is found on the CPU (`_group_norms_the_device_cannot_take`)."""
    from diffusers import DDPMPipeline, DDPMScheduler
    unet = _unet()
    sample = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    blocked = _group_norms_the_device_cannot_take(unet, sample)
    # Only the mid block's attention reaches a GroupNorm directly in this UNet; at batch 1 its output gets past
    # torch 2.13's F.group_norm (a copy) and not torch 2.14's (no copy), as client_paths.toml's path says.
    assert blocked == (["mid_block.resnets.1.norm1"] if torch_at_least(torch.__version__, (2, 14)) else [])
    expected = unet(sample, 10).sample
    if blocked:
        _assert_the_group_norm_finding(_eager_stage(unet, sample), blocked[0])
        _contiguous_group_norm_inputs(unet)
    assert (unet.to("neuron")(sample.to("neuron"), 10).sample.cpu() - expected).abs().max() < 1e-5
    pipe = DDPMPipeline(unet=_unet(), scheduler=DDPMScheduler(num_train_timesteps=10))
    if blocked:
        _contiguous_group_norm_inputs(pipe.unet)
    pipe.set_progress_bar_config(disable=True)
    images = []
    for device in ("cpu", "neuron"):
        pipe.to(device)
        images.append(pipe(batch_size=1, num_inference_steps=3, generator=torch.Generator().manual_seed(0),
                           output_type="np").images)
    assert np.abs(images[0] - images[1]).max() < 1e-5


def test_diffusers_attention_unet_meets_the_group_norm_finding_and_its_remedy_matches_the_cpu():
    """Faithful: S registers no native_group_norm, so torch's generic kernel meets the attention block's
    channels-last-strided output; `check` names the client path, the first layer it fails in (under torch 2.13
    the mid block's second ResNet block, whose input is channels-last-like; under torch 2.14, whose
    F.group_norm no longer copies its input, already the first, fed by AttnDownBlock2D) and the remedy
    (neuronkit/data/client_paths.toml)."""
    unet = _unet(attention=True)
    sample = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    blocked = _group_norms_the_device_cannot_take(unet, sample)
    assert blocked[0] == ("mid_block.resnets.0.norm1" if torch_at_least(torch.__version__, (2, 14))
                          else "mid_block.resnets.1.norm1")
    expected = unet(sample, 10).sample
    _assert_the_group_norm_finding(_eager_stage(unet, sample), blocked[0])
    unet.to("neuron")
    _contiguous_group_norm_inputs(unet)  # the remedy
    assert (unet(sample.to("neuron"), 10).sample.cpu() - expected).abs().max() < 1e-5
