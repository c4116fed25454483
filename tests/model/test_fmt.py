"""Times for people (model/fmt.py): the unit of the value's size, decimals enough to tell values a
tick spacing apart, one unit along an axis."""

from __future__ import annotations

import pytest

from gpuviewer.model.fmt import format_ns, under_ms


@pytest.mark.parametrize(
    "v, spacing, ref, want",
    [
        (20e6, 1e6, None, "20 ms"),  # was '20000 µs' at a 1 ms spacing (a 5 ms window)
        (1_019_178_800, 200, None, "1.0191788 s"),  # was '1019178800 ns' at a 1 µs window
        (1_019_179_000, 200, None, "1.0191790 s"),  # the next tick: told apart from the one before
        (900e6, 100e6, 1e9, "0.9 s"),  # one unit along an axis that reaches 1 s
        (1e9, 100e6, 1e9, "1.0 s"),
        (123_456, 20e3, None, "123 µs"),
        (1500, None, None, "1.500 µs"),  # a duration: three decimals in its own unit
        (12_345_678.9, None, None, "12.346 ms"),
        (750, 50, None, "750 ns"),
    ],
)
def test_times_read_in_their_unit(v, spacing, ref, want):
    assert format_ns(v, spacing, ref) == want


def test_ticks_a_spacing_apart_never_print_alike():
    for spacing in (1, 2, 5, 20, 200, 5_000, 100_000, 2e6, 5e8):
        for base in (0, 1_019_178_800, 3_600e9):
            labels = [format_ns(base + k * spacing, spacing, base + 10 * spacing) for k in range(10)]
            assert len(set(labels)) == 10, (spacing, base, labels)


@pytest.mark.parametrize(
    "ns, want",
    [(20, "20 ns"), (999, "999 ns"), (1_500, "1.5 µs"), (50_000, "50 µs"), (188_400, "188 µs"), (999_000, "999 µs")],
)
def test_times_under_a_millisecond_in_a_sentence_never_read_as_zero(ns, want):
    # the Kineto docs' trace: 20 ns of GPU work was 'of 0 µs of GPU time'
    assert under_ms(ns) == want


def test_a_kernels_short_name_reads_past_an_anonymous_namespace():
    """'(anonymous namespace)' is no argument list: the short name was cut to 'at::native::'."""
    from gpuviewer.model.fmt import short_name

    assert (
        short_name(
            "void at::native::(anonymous namespace)::cunn_SoftMaxForwardReg<float, float, float, "
            "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue, long, 8>(float*, float const*, long)"
        )
        == "at::native::cunn_SoftMaxForwardReg"
    )
    assert short_name("void at::native::vectorized_elementwise_kernel<4, X>(int, X)") == (
        "at::native::vectorized_elementwise_kernel"
    )
    assert short_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)") == (
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    )
    assert (
        short_name("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT") == "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
    )
