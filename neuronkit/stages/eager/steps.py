"""The eager stage's `neuronkit check` steps: `eager` (one forward against the CPU reference), `generate`
(greedy generation, token for token) and `train` (SGD steps on the CPU and on the device from the same
weights)."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch

from neuronkit.calling import call, generation_prompt, greedy, same_draws, seed_all
from neuronkit.graph_compile import compare
from neuronkit.op_audit.recorder import FULLY_MASKED_ROW, fully_masked_attention
from neuronkit.pipeline.check import CheckRun, autocast_name, gradients_for, parity, top1_note, worst_error
from neuronkit.pipeline.host_products import device_products
from neuronkit.pipeline.record import first_line
from neuronkit.policy import load_policy
from neuronkit.stages.eager import EagerOptions
from neuronkit.stages.eager.evidence import DeviceMemory, EagerForward, EagerGeneration, EagerTraining, NeffCache


def run_eager(run: CheckRun, record: EagerForward) -> tuple[str, str]:
    """One forward of the model moved with `.to("neuron")`, against the CPU reference: parity, the ops that
    fell back to the CPU (op tracking cleared first: this model's alone), the NEFF cache and device memory."""
    import torch_neuronx

    s = run.session
    model, untied = run.neuron()
    torch_neuronx.clear_op_tracking()
    torch.neuron.reset_peak_memory_stats()
    before = torch.neuron.neff_cache_stats()
    with torch.no_grad(), s.device_mode(), same_draws():
        out = call(model, run.neuron_inputs, **s.extra)
    record.parity = parity(run, out)
    record.untied_parameters = untied
    record.fallback_ops = fallbacks = sorted(torch_neuronx.get_fallback_ops())
    record.executed_ops = len(torch_neuronx.get_executed_ops())
    record.neff_cache = _cache_delta(before)
    record.memory = DeviceMemory(torch.neuron.memory_allocated(), torch.neuron.max_memory_allocated(),
                                 torch.neuron.get_device_properties(torch.neuron.current_device()).total_memory)
    record.autocast = autocast_name(s)
    rows, top1 = record.parity.outputs, record.parity.top1_agreement
    bad = [r.name for r in rows if not r.ok]
    if bad:
        why = _masked_rows_note(run, out, record)
        return "fail", f"{', '.join(bad)} off the CPU reference ({worst_error(rows)}){why}"
    notes = top1_note(top1, s.tol)
    if untied:
        notes.append(f".to('neuron') untied {len(untied)} shared parameter group(s) (re-tied for the check): the "
                     "device keeps tied weights tied, so the model replaces them itself; call model.tie_weights()")
    if fallbacks:
        notes.append(f"{len(fallbacks)} op(s) fall back to CPU: {', '.join(fallbacks)}")
    summary = f"matches CPU ({worst_error(rows)}" + (f", top-1 {top1:.0%})" if top1 is not None else ")")
    return ("warn", f"{summary}; " + "; ".join(notes)) if notes else ("pass", summary)


@contextlib.contextmanager
def fallbacks_into(record: EagerGeneration | EagerTraining) -> Iterator[None]:
    """Record in `record.fallback_ops` the ops that fell back to CPU inside the block."""
    import torch_neuronx

    torch_neuronx.clear_op_tracking()
    try:
        yield
    finally:
        record.fallback_ops = sorted(torch_neuronx.get_fallback_ops())


def run_generate(run: CheckRun, record: EagerGeneration) -> tuple[str, str]:
    """Greedy generation on the CPU and on the device, token for token."""
    s = run.session
    if not (hasattr(s.model, "can_generate") and s.model.can_generate()):
        return "skipped", f"{type(s.model).__name__} does not generate (not a causal LM or encoder-decoder)"
    inputs = s.inputs if isinstance(s.inputs, dict) else {"input_ids": s.inputs}
    prompt = {k: v[:1] for k, v in generation_prompt(inputs).items()}
    tokens = run.config.of(EagerOptions).generate_tokens
    try:
        with s.cpu_mode():
            cpu_tokens = greedy(s.model, prompt, tokens, s.tokenizer)[0].tolist()
    except Exception as exc:  # noqa: BLE001 - whatever stops it on the CPU is the model's, not the device's
        return "skipped", f"generate() fails on the CPU too, so not because of the device: {first_line(exc)}"
    model, _ = run.neuron()
    with s.device_mode(), fallbacks_into(record):
        device_tokens = greedy(model, compare.move_inputs(prompt, "neuron"), tokens, s.tokenizer)[0].cpu().tolist()
    start = 1 if getattr(s.hf_config, "is_encoder_decoder", False) else prompt["input_ids"].shape[1]
    diverge = next((i for i, (a, b) in enumerate(zip(cpu_tokens, device_tokens)) if a != b),
                   None if len(cpu_tokens) == len(device_tokens) else min(len(cpu_tokens), len(device_tokens)))
    record.prompt_tokens, record.cpu_tokens, record.neuron_tokens = start, cpu_tokens, device_tokens
    record.generate_identical, record.first_divergence = diverge is None, diverge
    if s.tokenizer is not None:
        record.cpu_text, record.neuron_text = s.tokenizer.decode(cpu_tokens), s.tokenizer.decode(device_tokens)
    fallbacks = record.fallback_ops
    note = f"; {len(fallbacks)} op(s) fall back to CPU: {', '.join(fallbacks)}" if fallbacks else ""
    if diverge is None:
        count = len(cpu_tokens)
        return "pass", f"greedy generate(): {count} identical token{'s' if count != 1 else ''}{note}"
    status = "fail" if s.dtype is torch.float32 else "warn"
    why = _masked_rows_text(_fully_masked(run, prompt))
    return status, f"greedy generate() diverges from CPU at new token {diverge}{why}"


def run_train(run: CheckRun, record: EagerTraining) -> tuple[str, str]:
    """SGD, not Adam: Adam divides each gradient by its own magnitude, so rounding-level differences in
    near-zero gradients become full-size updates, which says nothing about the device. The CPU model and
    the device copy train themselves, each undone afterwards (no third and fourth copy of the weights);
    the CPU runs under CPU autocast of the checked dtype, as the device under its own."""
    s, options = run.session, run.config.of(EagerOptions)
    lr, steps = options.lr, options.train_steps
    device_model, _ = run.neuron()
    runs = {"cpu": (s.model, s.inputs, s.cpu_mode),
            "neuron": (device_model, run.neuron_inputs, s.device_mode)}
    history: dict[str, dict[str, list[float]]] = {}
    source = "model"
    for device, (model, inputs, mode) in runs.items():
        losses, norms = [], []
        was_training = model.training
        with fallbacks_into(record) if device == "neuron" else device_products(s.dtype), \
                gradients_for(model, s.freeze, restore=True) as frozen:
            model.train()
            optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr)
            try:
                for step in range(steps):
                    seed_all(step)  # same dropout and masking on both devices (the device RNG is the host's)
                    with mode():
                        out = call(model, inputs, **s.extra)
                        loss = compare.loss_of(out)
                    source = compare.loss_source(out)
                    loss.backward()
                    losses.append(loss.item())
                    norms.append(compare.grad_norm(model))
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)
            finally:
                model.train(was_training)
        history[device] = {"losses": losses, "grad_norms": norms}
    loss_err = max(map(compare.relative_error, history["neuron"]["losses"], history["cpu"]["losses"]))
    grad_err = max(map(compare.relative_error, history["neuron"]["grad_norms"], history["cpu"]["grad_norms"]))
    ok = loss_err <= s.tol.train_rtol and grad_err <= s.tol.train_rtol
    record.cpu_losses, record.grad_norm_cpu = history["cpu"]["losses"], history["cpu"]["grad_norms"]
    record.neuron_losses, record.grad_norm_neuron = history["neuron"]["losses"], history["neuron"]["grad_norms"]
    record.max_loss_rel_err, record.max_grad_norm_rel_err, record.rtol = loss_err, grad_err, s.tol.train_rtol
    record.optimizer, record.steps, record.ok = f"SGD(lr={lr})", steps, ok
    record.cpu_autocast, record.frozen, record.loss_source = autocast_name(s), frozen, source
    held = f" ({', '.join(frozen)} held fixed)" if frozen else ""
    on = "" if source == "model" else f" on the {source} (the model has no loss of its own)"
    summary = f"{steps} SGD steps{held}{on}: loss rel err {loss_err:.1e}, grad-norm rel err {grad_err:.1e}"
    return ("pass" if ok else "fail"), summary + ("" if ok else f" (> {s.tol.train_rtol:g})")


def _masked_rows_note(run: CheckRun, out: Any, record: EagerForward) -> str:
    """Why the device's outputs have NaN where the CPU's have none, when the cause is a fully masked attention
    row (a left-padded batch): the attention modules, the category and its remedy; "" otherwise."""
    if not any(t.isnan().any() for _, t in compare.named_outputs(out) if t.is_floating_point()):
        return ""
    record.fully_masked_attention = _fully_masked(run, run.session.inputs)
    return _masked_rows_text(record.fully_masked_attention)


def _fully_masked(run: CheckRun, inputs: Any) -> list[str]:
    """The CPU model's attention modules that see a fully masked row on `inputs` (one forward, recorded)."""
    s = run.session
    with torch.no_grad(), s.cpu_mode():
        return fully_masked_attention(s.model, lambda: call(s.model, inputs, **s.extra))


def _masked_rows_text(paths: list[str]) -> str:
    """"; NaN from attention rows ... [sdpa_fully_masked_row]: <remedy>", or "" for no such module."""
    if not paths:
        return ""
    where = ", ".join(paths[:2]) + (f" and {len(paths) - 2} more" if len(paths) > 2 else "")
    policy = load_policy()
    return (f"; NaN from attention rows with every key masked (left padding) in {where} [{FULLY_MASKED_ROW}]: "
            f"{policy.remedies[FULLY_MASKED_ROW]}")


def _cache_delta(before: dict[str, Any]) -> NeffCache:
    after = torch.neuron.neff_cache_stats()
    return NeffCache(**{k: after[k] - before[k] for k in ("hits", "disk_hits", "misses", "entries", "compile_s")})
