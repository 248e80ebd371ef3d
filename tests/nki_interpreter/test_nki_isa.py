"""Today's `nki` API in the interpreter: kernels written for this project in NKI-lib's style (nl.ndarray
buffers, ISA instructions writing into dst=, views and access patterns), one per instruction, on tiny
tiles against NumPy; and the rules the new buffers obey."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import nki  # installed by `import torch` (the simulator's autoload) when the real one is absent
import nki.isa as nisa
import nki.language as nl
from neuronkit.nki import NkiRuleError

RNG = np.random.default_rng(1)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def sbuf(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)


def out_like(x, dtype=None):
    return nl.ndarray(x.shape, dtype=dtype or x.dtype, buffer=nl.shared_hbm)


# ---------------------------------------------------------------------------------------------------
# Data movement, views and access patterns


@nki.jit
def copy_through_reshape(x):
    """dma_copy HBM -> SBUF of a reshaped view, memset, tensor_copy, dma_copy back with a stepped slice."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols // 2), dtype=x.dtype, buffer=nl.shared_hbm)
    tile = sbuf((rows, 2, cols // 2))
    nisa.dma_copy(dst=tile.reshape((rows, cols)), src=x)
    evens = sbuf((rows, cols // 2))
    nisa.memset(dst=evens, value=0.0)
    nisa.tensor_copy(dst=evens, src=tile.reshape((rows, cols))[:, 0:cols:2])
    nisa.dma_copy(dst=out, src=evens)
    return out


def test_dma_copy_memset_tensor_copy_reshape_and_stepped_slices():
    x = rand(4, 8)
    np.testing.assert_array_equal(copy_through_reshape(x), x[:, ::2])


@nki.jit
def access_patterns(x):
    """`.ap()`: a transposed read of a [4, 3] tile and a broadcast (stride 0) of its first column."""
    out_t = nl.ndarray((3, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    out_b = nl.ndarray((4, 5), dtype=x.dtype, buffer=nl.shared_hbm)
    tile = sbuf((4, 3))
    nisa.dma_copy(dst=tile, src=x)
    nisa.dma_copy(dst=out_t, src=tile.ap([[1, 3], [3, 4]]))
    nisa.dma_copy(dst=out_b, src=tile.ap([[3, 4], [0, 5]]))
    return out_t, out_b


def test_access_patterns_stride_and_broadcast():
    x = rand(4, 3)
    transposed, broadcast = access_patterns(x)
    np.testing.assert_array_equal(transposed, x.T)
    np.testing.assert_array_equal(broadcast, np.repeat(x[:, :1], 5, axis=1))


def test_access_pattern_of_a_view_writes_through_to_the_tensor():
    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        tile = sbuf(x.shape)
        nisa.memset(dst=tile, value=0.0)
        column = tile.ap([[4, 3], [1, 1]], offset=1)  # column 1 of the [3, 4] tile
        nisa.dma_copy(dst=column.ap([[4, 2], [1, 1]], offset=4), src=x[1:3, 0:1])  # rows 1-2 of that column
        nisa.dma_copy(dst=out, src=tile)
        return out

    x = rand(3, 4)
    expected = np.zeros_like(x)
    expected[1:3, 1] = x[1:3, 0]
    np.testing.assert_array_equal(kernel(x), expected)


def test_access_pattern_past_the_tensor_is_refused():
    @nki.jit
    def kernel(x):
        tile = sbuf((4, 3))
        nisa.dma_copy(dst=tile, src=x)
        out = nl.ndarray((4, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=tile.ap([[3, 4], [1, 4]]))
        return out

    with pytest.raises(NkiRuleError, match="runs past the tensor's memory"):
        kernel(rand(4, 3))


def test_reshape_is_a_view_and_refuses_other_sizes():
    @nki.jit
    def kernel(x):
        x.reshape((5, 5))

    with pytest.raises(NkiRuleError, match="sizes differ"):
        kernel(rand(4, 6))


@nki.jit
def transpose_by_dma(x):
    out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
    tile = sbuf((x.shape[1], x.shape[0]))
    nisa.dma_transpose(dst=tile, src=x)
    nisa.dma_copy(dst=out, src=tile)
    return out


def test_dma_transpose():
    x = rand(3, 5)
    np.testing.assert_array_equal(transpose_by_dma(x), x.T)


# ---------------------------------------------------------------------------------------------------
# Vector / Scalar / GpSimd engine instructions


@nki.jit
def elementwise(x, y):
    """tensor_tensor, tensor_scalar with a per-partition operand, scalar_tensor_tensor, activation
    with bias and scale, reciprocal; a per-partition operand also applies to a 3-D tile."""
    p, f = x.shape
    outs = [nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm) for _ in range(5)]
    a, b, col = sbuf((p, f)), sbuf((p, f)), sbuf((p, 1))
    nisa.dma_copy(dst=a, src=x)
    nisa.dma_copy(dst=b, src=y)
    nisa.dma_copy(dst=col, src=y[:, 0:1])
    results = [sbuf((p, f)) for _ in range(5)]
    nisa.tensor_tensor(dst=results[0], data1=a, data2=b, op=nl.subtract)
    nisa.tensor_scalar(dst=results[1], data=a, op0=nl.multiply, operand0=col, op1=nl.add, operand1=1.0)
    nisa.scalar_tensor_tensor(dst=results[2], data=a, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=b)
    nisa.activation(dst=results[3].reshape((p, 2, f // 2)), op=nl.exp, data=a.reshape((p, 2, f // 2)), bias=col,
                    scale=0.5)
    nisa.reciprocal(dst=results[4], data=b)
    for out, result in zip(outs, results):
        nisa.dma_copy(dst=out, src=result)
    return tuple(outs)


def test_vector_and_scalar_engine_element_wise_instructions():
    x, y = rand(4, 6), rand(4, 6) + 3
    diff, scaled, fused, act, recip = elementwise(x, y)
    np.testing.assert_allclose(diff, x - y, rtol=1e-6)
    np.testing.assert_allclose(scaled, x * y[:, :1] + 1, rtol=1e-6)
    np.testing.assert_allclose(fused, x * 2 + y, rtol=1e-6)
    np.testing.assert_allclose(act, np.exp(x * 0.5 + y[:, :1]), rtol=1e-5)
    np.testing.assert_allclose(recip, 1 / y, rtol=1e-6)


@nki.jit
def running_sum(x):
    """tensor_tensor_scan as a cumulative sum: acc = 1 * acc + x[:, t]."""
    out = out_like(x)
    data, ones, init, result = sbuf(x.shape), sbuf(x.shape), sbuf((x.shape[0], 1)), sbuf(x.shape)
    nisa.dma_copy(dst=data, src=x)
    nisa.memset(dst=ones, value=1.0)
    nisa.memset(dst=init, value=0.5)
    nisa.tensor_tensor_scan(dst=result, data0=ones, data1=data, initial=init, op0=nl.multiply, op1=nl.add)
    nisa.dma_copy(dst=out, src=result)
    return out


def test_tensor_tensor_scan_is_a_running_sum():
    x = rand(3, 7)
    np.testing.assert_allclose(running_sum(x), 0.5 + np.cumsum(x, axis=1), rtol=1e-5)


@nki.jit
def reductions(x):
    """tensor_reduce along the last free axis of a 3-D view, max8 and nc_find_index8."""
    p, f = x.shape
    sums = nl.ndarray((p, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    top = nl.ndarray((p, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    where = nl.ndarray((p, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    data = sbuf((p, f))
    nisa.dma_copy(dst=data, src=x)
    s, t, w = sbuf((p, 2)), sbuf((p, 8)), sbuf((p, 8), nl.uint32)
    nisa.tensor_reduce(dst=s, op=nl.add, data=data.reshape((p, 2, f // 2)), axis=2)
    nisa.max8(dst=t, src=data)
    nisa.nc_find_index8(dst=w, data=data, vals=t)
    for out, result in ((sums, s), (top, t), (where, w)):
        nisa.dma_copy(dst=out, src=result)
    return sums, top, where


def test_reductions_max8_and_find_index8():
    x = rand(3, 16)
    sums, top, where = reductions(x)
    np.testing.assert_allclose(sums, x.reshape(3, 2, 8).sum(axis=2), rtol=1e-5)
    np.testing.assert_array_equal(top, -np.sort(-x, axis=1)[:, :8])
    np.testing.assert_array_equal(where, np.argsort(-x, axis=1, kind="stable")[:, :8])


@nki.jit
def fused_reductions(x):
    """activation_reduce (sum of exp) and tensor_scalar_reduce (max of x * 2) along the free axes."""
    p, f = x.shape
    exp_sum = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    doubled_max = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    data, e, d, s, m = sbuf((p, f)), sbuf((p, f)), sbuf((p, f)), sbuf((p, 1)), sbuf((p, 1))
    nisa.dma_copy(dst=data, src=x)
    nisa.activation_reduce(dst=e, op=nl.exp, data=data, reduce_op=nl.add, reduce_res=s)
    nisa.tensor_scalar_reduce(dst=d, data=data, op0=nl.multiply, operand0=2.0, reduce_op=nl.max, reduce_res=m)
    nisa.dma_copy(dst=exp_sum, src=s)
    nisa.dma_copy(dst=doubled_max, src=m)
    return exp_sum, doubled_max


def test_activation_reduce_and_tensor_scalar_reduce():
    x = rand(3, 10)
    exp_sum, doubled_max = fused_reductions(x)
    np.testing.assert_allclose(exp_sum, np.exp(x).sum(axis=1, keepdims=True), rtol=1e-5)
    np.testing.assert_array_equal(doubled_max, (x * 2).max(axis=1, keepdims=True))


def test_the_scalar_engine_reduces_only_by_adding():
    @nki.jit
    def kernel(x):
        data, out, res = sbuf(x.shape), sbuf(x.shape), sbuf((x.shape[0], 1))
        nisa.dma_copy(dst=data, src=x)
        nisa.activation(dst=out, op=nl.exp, data=data, reduce_op=nl.max, reduce_res=res,
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)

    with pytest.raises(NkiRuleError, match="reduce_op must be one of nl.add"):
        kernel(rand(2, 4))


@nki.jit
def affine(x):
    """iota with a channel multiplier, and affine_select keeping the lower triangle (a causal mask)."""
    n = x.shape[0]
    ramp = nl.ndarray((n, n), dtype=nl.int32, buffer=nl.shared_hbm)
    masked = nl.ndarray((n, n), dtype=nl.float32, buffer=nl.shared_hbm)
    r, data, m = sbuf((n, n), nl.int32), sbuf((n, n)), sbuf((n, n))
    nisa.iota(dst=r, pattern=[[1, n]], offset=10, channel_multiplier=100)
    nisa.dma_copy(dst=data, src=x)
    nisa.affine_select(dst=m, pattern=[[-1, n]], offset=0, channel_multiplier=1, on_true_tile=data,
                       on_false_value=-9.0, cmp_op=nl.greater_equal)
    nisa.dma_copy(dst=ramp, src=r)
    nisa.dma_copy(dst=masked, src=m)
    return ramp, masked


def test_iota_and_affine_select():
    x = rand(4, 4)
    ramp, masked = affine(x)
    rows, cols = np.indices((4, 4))
    np.testing.assert_array_equal(ramp, 10 + 100 * rows + cols)
    np.testing.assert_array_equal(masked, np.where(rows >= cols, x, -9.0))


# ---------------------------------------------------------------------------------------------------
# Tensor Engine


@nki.jit
def matmul_and_transposes(a, b):
    """nc_matmul into a PSUM dst, nc_transpose, and nc_matmul(is_transpose=True) against an identity."""
    k, m = a.shape
    n = b.shape[1]
    product = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    flipped = nl.ndarray((m, k), dtype=nl.float32, buffer=nl.shared_hbm)
    flipped_pe = nl.ndarray((m, k), dtype=nl.float32, buffer=nl.shared_hbm)
    sa, sb = sbuf((k, m)), sbuf((k, n))
    nisa.dma_copy(dst=sa, src=a)
    nisa.dma_copy(dst=sb, src=b)
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=sa, moving=sb)
    t = nl.ndarray((m, k), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_transpose(dst=t, data=sa)
    t_pe = nl.ndarray((m, k), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=t_pe, stationary=sa, moving=nl.shared_identity_matrix(k, dtype=nl.float32),
                   is_transpose=True)
    for out, result in ((product, acc), (flipped, t), (flipped_pe, t_pe)):
        copied = sbuf(result.shape)
        nisa.tensor_copy(dst=copied, src=result)
        nisa.dma_copy(dst=out, src=copied)
    return product, flipped, flipped_pe


def test_tensor_engine_matmul_and_transposes():
    a, b = rand(8, 4), rand(8, 6)
    product, flipped, flipped_pe = matmul_and_transposes(a, b)
    np.testing.assert_allclose(product, a.T @ b, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(flipped, a.T)
    np.testing.assert_array_equal(flipped_pe, a.T)


def test_nl_ndarray_in_sbuf_counts_against_sbuf():
    @nki.jit
    def kernel(x):
        keep = [sbuf((128, 16 * 1024)) for _ in range(4)]  # 4 x 64 KiB per partition > 224 KiB on trn2
        return keep

    with pytest.raises(NkiRuleError, match="SBUF is full"):
        kernel(rand(1, 1))


def test_tensors_placed_at_an_address_reuse_it_and_must_fit():
    @nki.jit
    def kernel(x):
        # 16 PSUM tiles of 2 KiB per partition placed on two banks: more than PSUM's 16 KiB if counted as live
        keep = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum, address=(0, (i % 2) * 2048))
                for i in range(16)]
        nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum, address=(0, 15 * 1024))
        return keep

    with pytest.raises(NkiRuleError, match=r"placed at address \(0, 15360\) runs past PSUM.*bytes 15360..17407 of 16384"):
        kernel(rand(1, 1))


@nki.jit
def ring_buffer(x):
    """Two tensors placed at one address are one memory: a tile written through the first reads back through
    the second (NKI-lib's modular allocator reuses addresses this way); one at an overlapping offset sees the
    overlap, in its own layout, also through `.ap()`."""
    p, f = x.shape
    out = nl.ndarray((3, p, f // 2), dtype=x.dtype, buffer=nl.shared_hbm)
    first = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf, address=(0, 4096))
    again = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf, address=(0, 4096))
    upper = nl.ndarray((p, f // 2), dtype=nl.float32, buffer=nl.sbuf, address=(0, 4096 + 4 * (f // 2)))
    nisa.dma_copy(dst=first, src=x)
    nisa.tensor_copy(dst=out[0], src=again[:, 0:f // 2])
    nisa.tensor_copy(dst=out[1], src=upper)
    nisa.dma_copy(dst=out[2], src=upper.ap([[f // 2, p], [1, f // 2]]))
    return out


def test_tensors_placed_at_one_address_share_their_elements():
    x = rand(8, 6)
    out = ring_buffer(x)
    np.testing.assert_array_equal(out[0], x[:, :3])
    np.testing.assert_array_equal(out[1], x[:, 3:])
    np.testing.assert_array_equal(out[2], x[:, 3:])


def test_a_matmul_into_a_reused_psum_address_starts_its_own_accumulation_group():
    """A PSUM tensor placed where an earlier one accumulated starts from its own writes; `accumulate=`
    (NKI ISA reference, nc_matmul) overrides: True adds to what the memory holds, False overwrites."""
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((3, 4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        sa, sb = sbuf(a.shape), sbuf(b.shape)
        nisa.dma_copy(dst=sa, src=a)
        nisa.dma_copy(dst=sb, src=b)
        for i, accumulate in enumerate((None, True, False)):
            earlier = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.psum, address=(0, 0))
            nisa.nc_matmul(earlier, sa, sb)
            nisa.nc_matmul(earlier, sa, sb)  # the same tensor: accumulates
            later = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.psum, address=(0, 0))
            nisa.nc_matmul(later, sa, sb, accumulate=accumulate)
            nisa.tensor_copy(dst=out[i], src=later)
        return out

    a, b = rand(8, 4), rand(8, 4)
    product = a.T @ b
    out = kernel(a, b)
    np.testing.assert_allclose(out[0], product, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[1], 3 * product, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[2], product, rtol=1e-5, atol=1e-5)


def test_dst_given_first_with_its_operands_by_keyword():
    """`nisa.tensor_scalar_reduce(out[...], data=x, ...)`: the positional tensor is dst (NKI-lib's style)."""
    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        tile, scaled, top = sbuf(x.shape), sbuf(x.shape), sbuf((x.shape[0], 1))
        nisa.dma_copy(dst=tile, src=x)
        nisa.tensor_scalar_reduce(scaled[:, :], data=tile, op0=nl.multiply, operand0=2.0, reduce_op=nl.maximum,
                                  reduce_res=top)
        nisa.tensor_tensor(scaled, data1=scaled, data2=top.ap([[1, x.shape[0]], [0, x.shape[1]]]), op=nl.subtract)
        nisa.dma_copy(dst=out, src=scaled)
        return out

    x = rand(4, 6)
    np.testing.assert_allclose(kernel(x), 2 * x - (2 * x).max(axis=1, keepdims=True), rtol=1e-6)


@nki.jit
def per_partition_vectors(x):
    """[P]-shaped (1-D) per-partition results: a reduction's reduce_res and a copied column."""
    p = x.shape[0]
    sums = nl.ndarray((p,), dtype=nl.float32, buffer=nl.shared_hbm)
    data, out, res, col = sbuf(x.shape), sbuf(x.shape), sbuf((p,)), sbuf((p,))
    nisa.dma_copy(dst=data, src=x)
    nisa.activation_reduce(dst=out, op=nl.copy, data=data, reduce_op=nl.add, reduce_res=res)
    nisa.tensor_copy(dst=col, src=res)
    nisa.dma_copy(dst=sums, src=col)
    return sums


def test_per_partition_vectors_may_be_one_dimensional():
    x = rand(4, 5)
    np.testing.assert_allclose(per_partition_vectors(x), x.sum(axis=1), rtol=1e-5)


# ---------------------------------------------------------------------------------------------------
# The name surface


def test_float8_dtypes_round_and_saturate():
    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        e4m3, back = sbuf(x.shape, nl.float8_e4m3), sbuf(x.shape)
        nisa.dma_copy(dst=e4m3, src=x)
        nisa.tensor_copy(dst=back, src=e4m3)
        nisa.dma_copy(dst=out, src=back)
        return out

    x = np.array([[0.3, 1000.0, -1000.0, 17.0]], dtype=np.float32)
    expected = torch.from_numpy(x).clamp(-240, 240).to(torch.float8_e4m3fn).float().numpy()
    np.testing.assert_array_equal(kernel(x), expected)
    assert expected[0, 1] == 240.0


def test_names_nki_lib_uses_exist_and_unexecuted_ones_raise_when_called():
    from nki.isa.constants import dge_mode, oob_mode  # noqa: F401 - the import itself is the check

    assert nisa.get_nc_version() == nisa.nc_version.gen3  # trn2
    @dataclasses.dataclass
    class Config(nl.NKIObject):  # NKI-lib declares fields without annotations and sets them by keyword
        tile = None

    assert Config(tile=4).tile == 4
    with pytest.raises(TypeError, match="Config has no attribute tiles"):
        Config(tiles=4)
    assert nl.tile_size.total_available_sbuf_size == 224 * 1024
    for dtype in (nl.float8_e4m3fn_x4, nl.float8_e5m2_x4, nl.float4_e2m1fn_x4):
        assert dtype.itemsize == 4
    with pytest.raises(NotImplementedError, match="nki.isa.quantize_mx is not implemented"):
        nki.jit(lambda x: nisa.quantize_mx(dst=x, src=x))(rand(1, 1))


# ---------------------------------------------------------------------------------------------------
# As a TorchNeuron user calls it


@nki.jit
def triple_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile, result = sbuf(x.shape), sbuf(x.shape)
    nisa.dma_copy(dst=tile, src=x)
    nisa.tensor_scalar(dst=result, data=tile, op0=nl.multiply, operand0=3.0)
    nisa.dma_copy(dst=out, src=result)
    return out


def test_todays_api_kernel_through_nki_op_eager_compiled_and_backward(fresh_dynamo):
    from torch_neuronx import nki_op

    @nki_op("test_isa::triple", mutates_args={})
    def triple(x: torch.Tensor) -> torch.Tensor:
        return triple_kernel(x)

    triple.register_autograd(lambda ctx, grad: triple(grad))
    x = torch.randn(4, 8, device="neuron", requires_grad=True)
    torch.testing.assert_close(triple(x).detach().cpu(), x.detach().cpu() * 3)
    torch.testing.assert_close(torch.compile(triple, backend="neuron")(x.detach()).cpu(), x.detach().cpu() * 3)
    triple(x).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), torch.full((4, 8), 3.0))


# ---------------------------------------------------------------------------------------------------
# The rarer instructions NKI-lib's kernels call (neuronkit/nki/isa_extra.py), each against its NumPy
# equivalent from the NKI ISA reference.


def _through_sbuf(body, *inputs, out_shape, out_dtype=nl.float32):
    """A kernel that DMAs `inputs` into SBUF, runs `body(dst, *tiles)` and DMAs dst out."""
    @nki.jit
    def kernel(a, b=None, c=None):
        out = nl.ndarray(out_shape, dtype=out_dtype, buffer=nl.shared_hbm)
        tiles = []
        for x in (x for x in (a, b, c) if x is not None):
            t = sbuf(x.shape, x.dtype)
            nisa.dma_copy(dst=t, src=x)
            tiles.append(t)
        dst = sbuf(out_shape, out_dtype)
        body(dst, *tiles)
        nisa.dma_copy(dst=out, src=dst)
        return out

    return kernel(*inputs)


def test_bn_stats_and_bn_aggr_give_mean_and_variance_over_tiles():
    x = rand(4, 10)

    def body(dst, t):
        stats = sbuf((4, 12))
        nisa.bn_stats(dst=stats[:, 0:6], data=t[:, 0:6])  # two bn_stats tiles, one bn_aggr
        nisa.bn_stats(dst=stats[:, 6:12], data=t[:, 6:10])
        nisa.bn_aggr(dst=dst, data=stats)

    out = _through_sbuf(body, x, out_shape=(4, 2))
    np.testing.assert_allclose(out[:, 0], x.mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[:, 1], x.var(axis=1), rtol=1e-5, atol=1e-6)

    def stats_only(dst, t):
        nisa.bn_stats(dst=dst, data=t)

    six = _through_sbuf(stats_only, x[:, :5], out_shape=(4, 6))
    even, odd = x[:, 0:5:2], x[:, 1:5:2]
    np.testing.assert_allclose(six, np.stack([np.full(4, 3.0), even.mean(1), even.var(1) * 3,
                                              np.full(4, 2.0), odd.mean(1), odd.var(1) * 2], axis=1), rtol=1e-5)
    with pytest.raises(NkiRuleError, match="at most 512 elements per partition"):
        _through_sbuf(stats_only, rand(2, 513), out_shape=(2, 6))


def test_range_select_keeps_a_band_and_reduces_its_max():
    x, lo, hi = rand(3, 8), np.array([[1.0], [0.0], [4.0]], np.float32), np.array([[5.0], [2.0], [9.0]], np.float32)

    def body(dst, t, b0, b1):
        top = sbuf((3, 1))
        nisa.range_select(dst=dst[:, 0:8], on_true_tile=t, comp_op0=nl.greater_equal, comp_op1=nl.less,
                          bound0=b0, bound1=b1, reduce_res=top, reduce_cmd=nisa.reduce_cmd.reset_reduce,
                          range_start=2)
        nisa.tensor_copy(dst=dst[:, 8:9], src=top)

    out = _through_sbuf(body, x, lo, hi, out_shape=(3, 9))
    index = 2 + np.arange(8)[None, :]
    expected = np.where((index >= lo) & (index < hi), x, np.finfo(np.float32).min)
    np.testing.assert_array_equal(out[:, :8], expected)
    np.testing.assert_array_equal(out[:, 8], expected.max(axis=1))


def test_tensor_copy_predicated_copies_where_the_predicate_holds():
    x, keep = rand(4, 6), (RNG.random((4, 6)) > 0.5).astype(np.uint8)

    def body(dst, t, p):
        nisa.memset(dst=dst, value=7.0)
        nisa.tensor_copy_predicated(dst=dst, src=t, predicate=p)

    np.testing.assert_array_equal(_through_sbuf(body, x, keep, out_shape=(4, 6)), np.where(keep, x, 7.0))

    def reversed_scalar(dst, t, p):
        nisa.tensor_copy(dst=dst, src=t)
        nisa.tensor_copy_predicated(dst=dst, src=0.0, predicate=p, reverse_pred=True)

    np.testing.assert_array_equal(_through_sbuf(reversed_scalar, x, keep, out_shape=(4, 6)), np.where(keep, x, 0.0))


def test_nc_match_replace8_replaces_first_occurrences_and_reports_indices():
    data = np.tile(np.arange(12, dtype=np.float32), (2, 2))  # every value twice per partition
    vals = np.stack([np.arange(8, dtype=np.float32), np.arange(4, 12, dtype=np.float32)])

    def body(dst, d, v):
        idx = sbuf((2, 8), nl.uint32)
        nisa.nc_match_replace8(dst=dst[:, 0:24], data=d, vals=v, imm=-1.0, dst_idx=idx)
        nisa.tensor_copy(dst=dst[:, 24:32], src=idx)

    out = _through_sbuf(body, data, vals, out_shape=(2, 32))
    expected = data.copy()
    for p in range(2):
        expected[p, vals[p].astype(int)] = -1.0  # the first of the two occurrences
    np.testing.assert_array_equal(out[:, :24], expected)
    np.testing.assert_array_equal(out[:, 24:], vals)


def test_tensor_partition_reduce_reduces_across_partitions():
    x = rand(5, 3)

    def body(dst, t):
        nisa.tensor_partition_reduce(dst[0:1, :], nl.add, t)
        nisa.tensor_partition_reduce(dst=dst[1:2, :], op=nl.maximum, data=t)

    out = _through_sbuf(body, x, out_shape=(2, 3))
    np.testing.assert_allclose(out, np.stack([x.sum(axis=0), x.max(axis=0)]), rtol=1e-6)


def test_nc_stream_shuffle_permutes_within_each_quadrant():
    x = rand(64, 3)
    mask = list(range(31, -1, -1))  # reverse each quadrant of 32 partitions
    mask[5] = 255  # partition 5 of each quadrant keeps what dst held

    def body(dst, t):
        nisa.memset(dst=dst, value=0.0)
        nisa.nc_stream_shuffle(src=t, dst=dst, shuffle_mask=mask)

    out = _through_sbuf(body, x, out_shape=(64, 3))
    expected = np.concatenate([x[31::-1], x[:31:-1]])
    expected[[5, 37]] = 0.0
    np.testing.assert_array_equal(out, expected)

    def broadcast(dst, t):  # one source partition to a quadrant (NKI-lib's bias broadcast)
        nisa.nc_stream_shuffle(src=t[0:1, :], dst=dst, shuffle_mask=[0] * 32)

    np.testing.assert_array_equal(_through_sbuf(broadcast, x, out_shape=(32, 3)), np.repeat(x[:1], 32, axis=0))
