"""timm and torchvision's detection models as released, on the simulated device with parity against the CPU,
where torchvision imports: in the torch 2.14 venv (`make test TORCH=2.14`). In the default venv (torch 2.13.0,
the CPU build) it cannot: PyPI's torchvision for torch 2.13 (0.28.0) is a CUDA build whose `_C.so` needs
`libc10_cuda.so`, and PyTorch's CPU index, which has the matching CPU build, is out of reach here; these tests
then skip, saying so. Tiny models built here, no weights from a hub."""

from __future__ import annotations

import copy
import importlib.util

import pytest
import torch

from neuronkit import client_paths

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _torchvision_problem() -> str | None:
    """Why torchvision cannot be used in this venv, or None when it imports."""
    cuda_build = ("PyPI's torchvision for torch 2.13 (0.28.0) is a CUDA build that cannot load beside the CPU "
                  "torch, and PyTorch's CPU index is out of reach: run these with `make test TORCH=2.14`")
    if importlib.util.find_spec("torchvision") is None:
        return f"torchvision is not installed in this venv ({torch.__version__}): {cuda_build}"
    try:
        import torchvision  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - the reason to skip, in one line
        return f"torchvision cannot import in this venv ({type(exc).__name__}: {exc}): {cuda_build}"
    return None


PROBLEM = _torchvision_problem()
needs_torchvision = pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")


def _images(count: int, size: int) -> torch.Tensor:
    return torch.rand(count, 3, size, size, generator=torch.Generator().manual_seed(0))


@needs_torchvision
def test_timm_trains_and_compiles_on_neuron_like_the_cpu():
    timm = pytest.importorskip("timm", reason="timm is not installed in this venv (it needs torchvision: install it "
                                              "where torchvision imports, e.g. the torch 2.14 venv)")

    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, depth=2,
                              num_classes=10)
    images, labels = _images(4, 32), torch.tensor([0, 1, 2, 3])
    runs = {}
    for device in ("cpu", "neuron"):
        trained = copy.deepcopy(model).to(device).train()
        optimizer = torch.optim.SGD(trained.parameters(), lr=0.1)
        losses = []
        for _ in range(2):
            loss = torch.nn.functional.cross_entropy(trained(images.to(device)), labels.to(device))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
        runs[device] = losses
    assert runs["neuron"] == pytest.approx(runs["cpu"], abs=1e-5)
    evaluated = copy.deepcopy(model).eval()
    expected = evaluated(images)
    compiled = torch.compile(evaluated.to("neuron"), backend="neuron", dynamic=False)
    assert (compiled(images.to("neuron")).cpu() - expected).abs().max() < 1e-4
    assert torch.neuron.get_dynamo_metrics(), "the neuron backend compiled nothing"


def _detector():
    """A Faster R-CNN as torchvision's documentation builds one on a custom backbone, tiny: 8 channels, 64 px."""
    from torchvision.models.detection import FasterRCNN
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.ops import MultiScaleRoIAlign

    torch.manual_seed(0)
    backbone = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.ReLU(),
                                   torch.nn.Conv2d(8, 8, 3, stride=2, padding=1), torch.nn.ReLU())
    backbone.out_channels = 8
    anchors = AnchorGenerator(sizes=((16, 32),), aspect_ratios=((0.5, 1.0, 2.0),))
    return FasterRCNN(backbone, num_classes=3, min_size=64, max_size=64, rpn_anchor_generator=anchors,
                      box_roi_pool=MultiScaleRoIAlign(["0"], output_size=4, sampling_ratio=2),
                      rpn_batch_size_per_image=32, box_batch_size_per_image=16)


def _targets(device: str) -> list[dict[str, torch.Tensor]]:
    boxes = [torch.tensor([[4.0, 4.0, 30.0, 30.0], [20.0, 10.0, 60.0, 50.0]]), torch.tensor([[8.0, 8.0, 40.0, 56.0]])]
    return [{"boxes": b.to(device), "labels": torch.arange(1, len(b) + 1, device=device)} for b in boxes]


@needs_torchvision
def test_torchvision_nms_and_a_detection_train_step_run_on_neuron_like_the_cpu():
    from torchvision.ops import nms

    boxes = torch.rand(20, 4, generator=torch.Generator().manual_seed(2)) * 32
    boxes[:, 2:] += boxes[:, :2]
    scores = torch.rand(20, generator=torch.Generator().manual_seed(3))
    kept = nms(boxes.to("neuron"), scores.to("neuron"), 0.3)
    assert kept.device.type == "neuron" and torch.equal(kept.cpu(), nms(boxes, scores, 0.3))

    model, images = _detector(), _images(2, 64)
    losses = {}
    for device in ("cpu", "neuron"):
        torch.manual_seed(1)  # the samplers' random draws (the device's random ops draw on the host generator)
        trained = copy.deepcopy(model).to(device).train()
        loss_dict = trained(list(images.to(device)), _targets(device))
        sum(loss_dict.values()).backward()
        losses[device] = {name: value.item() for name, value in loss_dict.items()}
    assert set(losses["cpu"]) == {"loss_classifier", "loss_box_reg", "loss_objectness", "loss_rpn_box_reg"}
    assert losses["neuron"] == pytest.approx(losses["cpu"], abs=1e-4)


def _rows(detections: dict[str, torch.Tensor]) -> list[tuple[float, ...]]:
    """A detector's output as sorted rows (box, label, score): boxes of equal score come in either order."""
    return sorted((*box, label, score) for box, label, score in zip(
        *(detections[key].cpu().tolist() for key in ("boxes", "labels", "scores"))))


@needs_torchvision
def test_compiling_a_detector_meets_the_nms_finding_and_its_remedy_matches_the_cpu():
    """Faithful: the graph breaks at nms leave graphs without outputs, which the Neuron backend refuses
    (finding torchvision/nms_compile); compiling the backbone, where the computation is, matches the CPU."""
    model, images = _detector().eval(), _images(1, 64)
    with torch.no_grad():
        expected = model(list(images))
        model.to("neuron")
        with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as failed:
            torch.compile(model, backend="neuron", dynamic=False)(list(images.to("neuron")))
        assert client_paths.explain(failed.value) == client_paths.find("torchvision", "nms_compile")
        torch._dynamo.reset()
        model.backbone = torch.compile(model.backbone, backend="neuron", dynamic=False)  # the remedy
        found = model(list(images.to("neuron")))
    assert len(expected[0]["boxes"]) > 0 and _rows(found[0]) == _rows(expected[0])
    assert torch.neuron.get_dynamo_metrics(), "the neuron backend compiled nothing"
