"""PEFT, trl and Diffusers as released on the simulated device, tiny and offline, with parity against the CPU
(issue 24). Installed by `make setup` (pyproject's `clients` group)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neuronkit import client_paths
from neuronkit.models import load_model

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


def test_diffusers_unet_without_attention_and_ddpm_pipeline_match_the_cpu():
    from diffusers import DDPMPipeline, DDPMScheduler
    unet = _unet()
    sample = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    expected = unet(sample, 10).sample
    assert (unet.to("neuron")(sample.to("neuron"), 10).sample.cpu() - expected).abs().max() < 1e-5
    pipe = DDPMPipeline(unet=_unet(), scheduler=DDPMScheduler(num_train_timesteps=10))
    pipe.set_progress_bar_config(disable=True)
    images = []
    for device in ("cpu", "neuron"):
        pipe.to(device)
        images.append(pipe(batch_size=1, num_inference_steps=3, generator=torch.Generator().manual_seed(0),
                           output_type="np").images)
    assert np.abs(images[0] - images[1]).max() < 1e-5


def test_diffusers_attention_unet_meets_the_group_norm_finding_and_its_remedy_matches_the_cpu():
    """Faithful: S registers no native_group_norm, so torch's generic kernel meets the attention block's
    channels-last-strided output; `check` names the client path, the layer and the remedy
    (neuronkit/data/client_paths.toml)."""
    import neuronkit
    unet = _unet(attention=True)
    sample = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    expected = unet(sample, 10).sample
    report = neuronkit.check(unet, {"sample": sample, "timestep": torch.tensor([10])}, stages=["eager"])
    eager = next(stage for stage in report.stages if stage.stage == "eager")
    finding = client_paths.find("diffusers", "group_norm_channels_last")
    assert eager.status == "error" and "diffusers path: GroupNorm fails on a channels-last-strided tensor in " \
        "mid_block.resnets.1.norm1" in eager.summary
    assert "[client:group_norm_channels_last]" in eager.summary and finding.remedy in eager.summary
    unet.to("neuron")
    for module in unet.modules():  # the remedy: every GroupNorm gets a contiguous input
        if isinstance(module, torch.nn.GroupNorm):
            module.register_forward_pre_hook(lambda _, args: (args[0].contiguous(),))
    assert (unet(sample.to("neuron"), 10).sample.cpu() - expected).abs().max() < 1e-5
