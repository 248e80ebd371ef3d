"""The NKI interpreter: kernels in the style of the public NKI tutorials against NumPy/PyTorch, and each
of Trainium's rules it enforces, with the error that explains it."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest
import torch

import nki  # installed by `import torch` (the simulator's autoload) when the real one is absent
import nki.isa as nisa
import nki.language as nl
from neuronkit.nki import NkiRuleError, NkiUninitializedReadWarning
from neuronkit.nki.hardware import core

RNG = np.random.default_rng(0)


def rand(*shape: int, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------------------------------------------
# Tutorial-style kernels


@nki.jit
def tensor_add(a_input, b_input):
    """SPMD tensor addition: each program adds one [128, 512] tile."""
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    ix = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    iy = nl.program_id(1) * 512 + nl.arange(512)[None, :]
    nl.store(c_output[ix, iy], value=nl.load(a_input[ix, iy]) + nl.load(b_input[ix, iy]))
    return c_output


def test_spmd_tensor_addition_matches_numpy():
    a, b = rand(256, 1024, dtype=np.float16), rand(256, 1024, dtype=np.float16)
    out = tensor_add[2, 2](a, b)
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, a + b, atol=1e-3)
    np.testing.assert_array_equal(tensor_add[[2, 2]](a, b), out)  # a list grid, as torch_neuronx accepts


def test_spmd_tensor_addition_on_the_device_in_bfloat16():
    a = torch.rand(256, 1024, dtype=torch.bfloat16, device="neuron")
    b = torch.rand(256, 1024, dtype=torch.bfloat16, device="neuron")
    out = tensor_add[2, 2](a, b)
    assert out.device.type == "neuron" and out.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu(), (a.cpu() + b.cpu()))


@nki.jit
def softmax_rows(x):
    """Row softmax over [N, F] with N not a multiple of 128: the last tile is masked."""
    n, f = x.shape
    out = nl.ndarray((n, f), dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(f)[None, :]
    for t in nl.affine_range((n + 127) // 128):
        i_p = t * 128 + nl.arange(128)[:, None]
        tile = nl.load(x[i_p, i_f], mask=(i_p < n))
        row_max = nl.max(tile, axis=1, keepdims=True, mask=(i_p < n))
        e = nl.exp(nl.subtract(tile, row_max, mask=(i_p < n)), mask=(i_p < n))
        total = nl.sum(e, axis=1, keepdims=True, mask=(i_p < n))
        nl.store(out[i_p, i_f], value=nl.divide(e, total, mask=(i_p < n)), mask=(i_p < n))
    return out


def test_masked_softmax_matches_torch():
    x = rand(200, 64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NkiUninitializedReadWarning)  # masked-off rows are never used
        out = softmax_rows(x)
    torch.testing.assert_close(torch.from_numpy(out), torch.softmax(torch.from_numpy(x), dim=1))


@nki.jit
def layer_norm(x, gamma, beta, eps):
    """LayerNorm over the free axis; gamma/beta [1, F] broadcast to every partition."""
    n, f = x.shape
    out = nl.ndarray((n, f), dtype=x.dtype, buffer=nl.shared_hbm)
    g = nl.broadcast_to(nl.load(gamma[0:1, 0:f]), (128, f))
    b = nl.broadcast_to(nl.load(beta[0:1, 0:f]), (128, f))
    for t in nl.affine_range(n // 128):
        tile = nl.load(x[t * 128:(t + 1) * 128, 0:f])
        mean = nl.mean(tile, axis=1, keepdims=True)
        centred = tile - mean
        var = nl.mean(nl.square(centred), axis=1, keepdims=True)
        normed = centred * nl.rsqrt(var + eps)
        nl.store(out[t * 128:(t + 1) * 128, 0:f], value=normed * g + b)
    return out


def test_layer_norm_matches_torch():
    x, gamma, beta = rand(256, 96), rand(1, 96), rand(1, 96)
    out = layer_norm(x, gamma, beta, 1e-5)
    expected = torch.nn.functional.layer_norm(torch.from_numpy(x), (96,), torch.from_numpy(gamma[0]),
                                              torch.from_numpy(beta[0]), 1e-5)
    torch.testing.assert_close(torch.from_numpy(out), expected, atol=1e-4, rtol=1e-4)


@nki.jit
def rms_norm(x, weight):
    """RMSNorm as the NKI RMSNorm tutorial writes it: the weight row loaded once through index tiles and
    broadcast to the partitions, the free-axis reduction kept without keepdims ([128]) and multiplied into the
    [128, N] tile, a masked last tile."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows, width = x.shape
    ip, i_one, i_free = nl.arange(128)[:, None], nl.arange(1)[:, None], nl.arange(width)[None, :]
    w_row = nl.load(weight.reshape((1, width))[i_one, i_free])
    for t in nl.affine_range((rows + 127) // 128):
        valid = t * 128 + ip < rows
        tile = nl.load(x[t * 128 + ip, i_free], mask=valid)
        scale = nl.rsqrt(nl.sum(nl.square(tile, mask=valid), axis=[1], mask=valid) / width)
        normed = nl.multiply(tile, scale, mask=valid)
        normed[...] = nl.multiply(normed, w_row.broadcast_to((128, width)), mask=valid)
        nl.store(out[t * 128 + ip, i_free], value=normed, mask=valid)
    return out


def test_rms_norm_tutorial_broadcasts_a_reduction_and_a_weight_row_as_the_engines_do():
    x, weight = rand(200, 64), rand(64)
    out = rms_norm(x, weight)
    np.testing.assert_allclose(out, x / np.sqrt(np.mean(x * x, axis=1, keepdims=True)) * weight, rtol=1e-4, atol=1e-5)


@nki.jit
def tiled_matmul(lhsT, rhs):
    """result[M, N] = lhsT[K, M]ᵀ @ rhs[K, N] through nki.isa, accumulating K tiles in PSUM."""
    k_size, m_size = lhsT.shape
    _, n_size = rhs.shape
    tm, tk, tn = nl.tile_size.gemm_stationary_fmax, nl.tile_size.pmax, nl.tile_size.gemm_moving_fmax
    result = nl.ndarray((m_size, n_size), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_size // tm):
        for n in nl.affine_range(n_size // tn):
            acc = nl.ndarray((tm, tn), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_size // tk):
                a = nl.ndarray((tk, tm), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((tk, tn), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k * tk:(k + 1) * tk, m * tm:(m + 1) * tm])
                nisa.dma_copy(dst=b, src=rhs[k * tk:(k + 1) * tk, n * tn:(n + 1) * tn])
                nisa.nc_matmul(dst=acc, stationary=a, moving=b)
            res = nl.ndarray((tm, tn), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc, dtype=result.dtype)
            nisa.dma_copy(dst=result[m * tm:(m + 1) * tm, n * tn:(n + 1) * tn], src=res)
    return result


def test_tiled_matmul_through_isa_matches_numpy():
    lhsT, rhs = rand(256, 256), rand(256, 1024)
    np.testing.assert_allclose(tiled_matmul(lhsT, rhs), lhsT.T @ rhs, rtol=1e-4, atol=1e-3)


@nki.jit
def attention_scores(q, k):
    """softmax(qᵀk) with nl.matmul(transpose_x=True), nl.max/nki.isa reductions and activation."""
    _, s = q.shape
    out = nl.ndarray((s, s), dtype=nl.float32, buffer=nl.shared_hbm)
    q_t, k_t = nl.load(q), nl.load(k)
    scores = nl.copy(nl.matmul(q_t, k_t, transpose_x=True))
    row_max = nisa.tensor_reduce(op=nl.max, data=scores, axis=1, keepdims=True)
    shifted = nisa.tensor_scalar(data=scores, op0=nl.subtract, operand0=row_max)
    e = nisa.activation(op=nl.exp, data=shifted)
    total = nisa.tensor_reduce(op=nl.add, data=e, axis=1, keepdims=True)
    nl.store(out, value=nisa.tensor_scalar(data=e, op0=nl.multiply, operand0=nisa.reciprocal(total)))
    return out


def test_attention_scores_match_torch():
    q, k = rand(64, 128), rand(64, 128)
    expected = torch.softmax(torch.from_numpy(q).T @ torch.from_numpy(k), dim=1)
    torch.testing.assert_close(torch.from_numpy(attention_scores(q, k)), expected, atol=1e-5, rtol=1e-4)


@nki.jit
def transpose_blocks(x, rows, cols):
    """Each partition's flattened [rows, cols] block transposed by index arithmetic (nl.mgrid)."""
    p, f = x.shape
    out = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.load(x)
    moved = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    i_p, i_r, i_c = nl.mgrid[0:p, 0:rows, 0:cols]
    moved[i_p, i_c * rows + i_r] = nl.copy(tile[i_p, i_r * cols + i_c])
    nki.isa.dma_copy(dst=out, src=nisa.tensor_copy(moved))
    return out


def test_transpose_by_index_tiles_matches_numpy():
    x = np.arange(5 * 12, dtype=np.int32).reshape(5, 12)
    expected = x.reshape(5, 3, 4).transpose(0, 2, 1).reshape(5, 12)
    np.testing.assert_array_equal(transpose_blocks(x, 3, 4), expected)


@nki.jit
def cast_and_transpose(x):
    out = nl.ndarray((x.shape[1], x.shape[0]), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    nl.store(out, value=nl.copy(nisa.nc_transpose(nl.load(x)), dtype=nl.bfloat16))
    return out


def test_bfloat16_results_are_rounded_like_torch():
    x = torch.randn(32, 64)
    out = cast_and_transpose(x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, x.T.to(torch.bfloat16), atol=0, rtol=0)


def test_kernel_writes_into_an_output_argument():
    @nki.jit
    def relu_into(x, out):
        nl.store(out[0:128, 0:8], value=nl.relu(nl.load(x[0:128, 0:8])))

    x, out = rand(128, 8), np.zeros((128, 8), np.float32)
    assert relu_into(x, out) is None
    np.testing.assert_array_equal(out, np.maximum(x, 0))


def test_both_import_paths_and_simulate_entry_points():
    import neuronxcc.nki as old_nki
    import neuronxcc.nki.language as old_nl

    assert old_nl.exp is nl.exp and old_nki.jit is nki.jit
    a, b = rand(128, 512), rand(128, 512)
    np.testing.assert_allclose(nki.simulate(tensor_add)(a, b), a + b)
    np.testing.assert_allclose(old_nki.simulate_kernel(tensor_add, a, b), a + b)


# ---------------------------------------------------------------------------------------------------
# Trainium's rules


def run(body, *arrays):
    """Run `body(*hbm_tensors)` as a kernel on the given arrays."""
    return nki.jit(body)(*arrays)


def test_partition_dimension_at_most_128_on_load():
    def kernel(x):
        nl.load(x[0:256, 0:64])

    with pytest.raises(NkiRuleError, match=r"spans 256 partitions.*128 \(nl.tile_size.pmax\)"):
        run(kernel, rand(256, 64))


def test_partition_dimension_at_most_128_on_allocation():
    def kernel(x):
        nl.ndarray((nl.par_dim(129), 4), dtype=nl.float32, buffer=nl.sbuf)

    with pytest.raises(NkiRuleError, match="129 partitions"):
        run(kernel, rand(1, 1))


@pytest.mark.parametrize("stationary, moving, message", [
    ((128, 256), (128, 512), r"stationary tile \(128, 256\) has free size 256 > 128"),
    ((128, 128), (128, 1024), r"moving tile \(128, 1024\) has free size 1024 > 512"),
])
def test_matmul_tile_limits(stationary, moving, message):
    def kernel(s, m):
        nisa.nc_matmul(nl.load(s), nl.load(m))

    with pytest.raises(NkiRuleError, match=message):
        run(kernel, rand(*stationary), rand(*moving))


def test_matmul_contraction_over_at_most_128_partitions():
    def kernel(x, y):
        nl.matmul(nl.load(x), nl.load(y))

    with pytest.raises(NkiRuleError, match="spans 256 partitions"):  # y's K=256 cannot even be loaded
        run(kernel, rand(64, 256), rand(256, 64))


def test_matmul_accumulates_in_float32_psum():
    def into(buffer, dtype):
        def kernel(s, m):
            dst = nl.ndarray((128, 128), dtype=dtype, buffer=buffer)
            nisa.nc_matmul(dst, nl.load(s), nl.load(m))
        return kernel

    with pytest.raises(NkiRuleError, match="accumulates in float32"):
        run(into(nl.psum, nl.bfloat16), rand(128, 128), rand(128, 128))
    with pytest.raises(NkiRuleError, match="writes to PSUM"):
        run(into(nl.sbuf, nl.float32), rand(128, 128), rand(128, 128))


def test_matmul_operands_come_from_sbuf():
    def kernel(x):
        product = nisa.nc_matmul(nl.load(x), nl.load(x))  # in PSUM
        nisa.nc_matmul(product, nl.load(x))

    with pytest.raises(NkiRuleError, match="operand .* is in PSUM .* reads its operands from SBUF"):
        run(kernel, rand(64, 64))


def test_sbuf_capacity_per_partition_trn2():
    per_tile = 32768 * 4  # 128 KiB per partition: one fits in 224 KiB, two do not

    def kernel(x):
        kept = [nl.ndarray((128, 32768), dtype=nl.float32, buffer=nl.sbuf) for _ in range(2)]
        return kept

    assert core().sbuf_bytes_per_partition == 224 * 1024 and per_tile < 224 * 1024 < 2 * per_tile
    with pytest.raises(NkiRuleError, match=r"SBUF is full: .*128 KiB per partition, 128 KiB of 224 KiB"):
        run(kernel, rand(1, 1))


def test_tiles_dropped_in_a_loop_free_their_sbuf():
    def kernel(x):
        for _ in nl.affine_range(4):
            nl.ndarray((128, 32768), dtype=nl.float32, buffer=nl.sbuf)

    run(kernel, rand(1, 1))


def test_psum_capacity_per_partition():
    def kernel(x):
        return [nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(9)]  # 8 banks of 2 KiB

    with pytest.raises(NkiRuleError, match=r"PSUM is full: .*2 KiB per partition, 16 KiB of 16 KiB"):
        run(kernel, rand(1, 1))


def test_trn1_target_has_less_sbuf(monkeypatch):
    monkeypatch.setenv("NEURONKIT_NKI_TARGET", "trn1")
    core.cache_clear()
    try:
        def kernel(x):
            return [nl.ndarray((128, 25600), dtype=nl.float32, buffer=nl.sbuf) for _ in range(2)]  # 200 KiB

        with pytest.raises(NkiRuleError, match="of 192 KiB per partition.*NeuronCore-v2 \\(trn1\\)"):
            run(kernel, rand(1, 1))
    finally:
        monkeypatch.delenv("NEURONKIT_NKI_TARGET")
        core.cache_clear()


@pytest.mark.parametrize("index, message", [
    (lambda x: x[0:128, 0:600], r"index 0:600 on axis 1 .* valid indices are 0..511"),
    (lambda x: x[nl.arange(128)[:, None] + 64, nl.arange(512)[None, :]], r"index 64..191 on axis 0"),
    (lambda x: x[-1, 0:512], r"index -1 on axis 0"),
])
def test_out_of_bounds_access(index, message):
    def kernel(x):
        nl.load(index(x))

    with pytest.raises(NkiRuleError, match=message):
        run(kernel, rand(128, 512))


def test_mask_keeps_a_partial_tile_in_bounds():
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.arange(128)[:, None], nl.arange(8)[None, :]
        nl.store(out[i_p, i_f], value=nl.load(x[i_p, i_f], mask=(i_p < 100)), mask=(i_p < 100))
        return out

    x = rand(100, 8)
    np.testing.assert_array_equal(run(kernel, x), x)


def test_reading_unwritten_memory_is_nan_and_names_the_buffer():
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        scratch = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf, name="scratch")
        scratch[0:64, 0:4] = nl.load(x[0:64, 0:4])
        nl.store(out, value=nl.copy(scratch))
        return out

    with pytest.warns(NkiUninitializedReadWarning, match=r"read 256 element\(s\) of sbuf tensor 'scratch'"):
        out = run(kernel, rand(128, 4))
    assert np.isnan(out[64:]).all() and not np.isnan(out[:64]).any()


def test_reducing_across_partitions_is_refused():
    def kernel(x):
        nl.sum(nl.load(x), axis=0)

    with pytest.raises(NkiRuleError, match="axis 0 \\(the partition dimension\\)"):
        run(kernel, rand(128, 4))


def test_computing_on_hbm_needs_a_load_first():
    def kernel(x):
        nl.exp(x)

    with pytest.raises(NkiRuleError, match="Load it first"):
        run(kernel, rand(128, 4))


def test_apis_outside_the_subset_name_themselves():
    with pytest.raises(NotImplementedError, match="nki.language.dropout is not implemented"):
        nl.dropout  # noqa: B018
    with pytest.raises(NotImplementedError, match="nki.isa.sequence_bounds is not implemented"):
        run(lambda x: nisa.sequence_bounds(segment_ids=x), rand(1, 1))  # exists; raises when called
    assert not hasattr(nl, "dropout")  # feature detection sees it as absent
    with pytest.raises(ImportError):
        from nki.language import dropout  # noqa: F401
    with pytest.raises(NotImplementedError, match=r"nc_matmul\(is_moving_onezero=True\)"):
        run(lambda s, m: nisa.nc_matmul(nl.load(s), nl.load(m), is_moving_onezero=True), rand(4, 4), rand(4, 4))


def test_pypi_placeholder_counts_as_absent(tmp_path, monkeypatch):
    from neuronkit.nki import modules

    pkg = tmp_path / "nkiplaceholder_probe"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('raise ImportError("WRONG PACKAGE: install from the Neuron repository")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    assert not modules.usable("nkiplaceholder_probe")
    assert "nkiplaceholder_probe" not in sys.modules
    assert getattr(sys.modules["nki"], "__neuronkit_simulated__", False)


def test_constant_arguments_are_compiled_in_and_must_be_hashable():
    @nki.jit
    def fill(x, value, dtype):
        out = nl.ndarray(x.shape, dtype=dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.full(x.shape, value, dtype))
        return out

    np.testing.assert_array_equal(fill(np.zeros((4, 2), np.float32), 3, nl.int32), np.full((4, 2), 3, np.int32))
    with pytest.raises(TypeError, match="neither a tensor nor a hashable constant"):
        fill(np.zeros((4, 2), np.float32), {"v": 3}, nl.int32)
