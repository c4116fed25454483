"""Lane and rank names shortened to the label column keep what tells them apart (label_fit), in
the label column's real font; and the column is fitted to the window's real width, not to the
width the view had before the window was shown (a 1366 px screen got 200 px of labels)."""

import os

from conftest import SAMPLES, make_window
from PySide6.QtGui import QFont, QFontMetrics

from gpuviewer.widgets.label_fit import ELL, fit_label

# two lanes of one GPU that Qt's middle elision drew as the same "GPU 0 · stre… compute + NCCL"
S14 = "▾ GPU 0 · stream 14 · compute + NCCL"
S18 = "▾ GPU 0 · stream 18 · compute + NCCL"
TITLE = "▾ Rank 0 · GPU 0 NVIDIA H200 · host"


def _metrics(bold=False):
    f = QFont()
    f.setPixelSize(11)
    f.setBold(bold)
    return QFontMetrics(f).horizontalAdvance


def test_a_name_that_fits_is_unchanged(qapp):
    adv = _metrics()
    assert fit_label(S14, adv(S14), adv) == S14
    assert fit_label("", 10, adv) == ""


def test_lanes_of_one_gpu_stay_told_apart_down_to_their_numbers(qapp):
    adv = _metrics()
    # narrowest width at which the numbered parts can stay whole: every other part at 3 letters
    need = adv("▾ GPU 0 · stream 14 · com" + ELL)
    seen = 0
    for width in range(int(adv(S14)) - 1, 20, -3):
        a, b = fit_label(S14, width, adv), fit_label(S18, width, adv)
        assert adv(a) <= width and adv(b) <= width, (width, a, b)
        if width >= need:
            assert "stream 14" in a and "stream 18" in b, (width, a, b)
            assert a.startswith("▾ GPU 0 · ") and ELL in a, (width, a)
            seen += 1
    assert seen >= 5  # the range above covered widths where the kind was cut


def test_a_rank_title_keeps_the_rank_and_the_gpu_model(qapp):
    adv = _metrics(bold=True)
    width = adv(TITLE) - adv("NVIDIA") // 2  # a little short: one part must give
    got = fit_label(TITLE, width, adv)
    assert adv(got) <= width
    assert got.startswith("▾ Rank 0 · GPU 0") and "H200" in got and got.endswith("· host"), got


def test_a_name_without_parts_is_cut_in_its_middle(qapp):
    adv = _metrics()
    name = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    got = fit_label(name, 120, adv)
    assert adv(got) <= 120 and got.startswith("nccl") and got.endswith(">)") and ELL in got
    assert fit_label(name, 1, adv) == ELL  # nothing fits: the ellipsis alone
    words = "Optimizer.step#AdamW.step"  # one part without a number gives way at its end
    got = fit_label(words, 90, adv)
    assert adv(got) <= 90 and got.startswith("Optimizer") and got.endswith(ELL)
    assert fit_label(words, 8, adv) == ELL or adv(fit_label(words, 8, adv)) <= 8


def test_the_label_column_is_fitted_again_when_the_window_grows_until_dragged(qtbot, tmp_path):
    w = make_window(qtbot, tmp_path, block_analysis=True, size=(900, 650))
    assert w.open_paths([os.path.join(SAMPLES, "ddp")], block=True)
    tv = w.timeline
    want = tv.labels.wanted_width()
    small = tv.labels.width()
    w.resize(1800, 1000)
    qtbot.waitUntil(lambda: tv.width() > 1500)
    assert tv.labels.width() >= min(want, tv.width() // 4) - 4
    assert tv.labels.width() > small or small >= want - 4
    # dragged by hand: the width the user chose survives the next resize
    tv.split.setSizes([170, tv.width() - 170])
    tv.split.splitterMoved.emit(170, 1)
    chosen = tv.labels.width()
    w.resize(1500, 900)
    qtbot.waitUntil(lambda: tv.width() <= 1500)
    assert tv.labels.width() == chosen


def test_a_narrow_column_draws_two_lanes_of_one_gpu_apart(qtbot, tmp_path):
    w = make_window(qtbot, tmp_path, block_analysis=True, size=(1366, 728))
    assert w.open_paths([os.path.join(SAMPLES, "ddp")], block=True)
    tv = w.timeline
    tv.split.setSizes([150, tv.width() - 150])
    tv.labels.grab()  # painted at that width
    drawn = {text: got for (text, width, _bold), got in tv.labels._fitted.items() if width == tv.labels.width() - 10}
    a = next(v for k, v in drawn.items() if k.endswith("GPU 0 · stream 7 annotations"))
    b = next(v for k, v in drawn.items() if k.endswith("GPU 0 · stream 17 annotations"))
    assert ELL in a and ELL in b  # both had to be shortened
    assert "stream 7" in a and "stream 17" in b, (a, b)


def test_a_rank_title_gives_up_the_vendor_and_file_before_the_model(qapp):
    """'Ra… 0 · GPU 0…100-SXM4-40GB · s…0….' and 'GPU 0 T…V100-D…-32GB' (a review): digits inside
    a word (a model's A100-SXM4-40GB, a file's perlmutter0.sqlite) were taken for numbers that name
    the lane, and the words between them cut. The vendor goes first, then the file, cut at its end;
    'Rank 0 · GPU 0' and the model's start stay."""
    adv = _metrics(bold=True)
    for title, model in (
        ("▾ Rank 0 · GPU 0 NVIDIA A100-SXM4-40GB · saxpy-mpi-cuda_nsys_perlmutter0.sqlite", "A100-SXM4"),
        (
            "▾ Rank 0 · GPU 0 Tesla V100-DGXS-32GB · tb_plugin_resnet50_num_workers_0_worker0.pt.trace.json.gz",
            "V100-DGXS",
        ),
    ):
        for width in (adv(title) - 10, 300, 250):
            got = fit_label(title, width, adv)
            assert adv(got) <= width, (width, got)
            assert got.startswith("▾ Rank 0 · GPU 0 ") and model in got, (width, got)
            assert "NVIDIA" not in got and "Tesla" not in got
        # the file part is cut at its end, never in the middle of its digits
        tail = fit_label(title, 250, adv).rsplit(" · ", 1)[1]
        assert tail.endswith(ELL) and title.rsplit(" · ", 1)[1].startswith(tail[:-1])


def test_a_number_before_a_dash_still_names_its_lane(qapp):
    """'stream 14-copy': the number before '-' names the lane and is kept (a review: it was taken
    for part of a word and cut to 'str…')."""
    adv = _metrics()
    a, b = "▾ GPU 0 · stream 14-copy", "▾ GPU 0 · stream 18-copy"
    for width in (adv(a) - 8, 110, 95):
        fa, fb = fit_label(a, width, adv), fit_label(b, width, adv)
        assert adv(fa) <= width and fa != fb and "14" in fa and "18" in fb, (width, fa, fb)
