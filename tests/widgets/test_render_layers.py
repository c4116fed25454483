"""The timeline drawn as layers (render/timeline_item.py): the pixels of the single item they
replaced, and a change to one layer redraws that layer only.

tests/data/render_ref/*.png were rendered by the single TimelineItem before the split (the same
scenarios, the same widget size). GPUVIEWER_WRITE_RENDER_REF=1 writes them anew instead of
comparing (for a deliberate change of what the timeline draws).
"""

import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, SCALE_TOOL, trace_path
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication, QWidget

REF = os.path.join(ROOT, "tests", "data", "render_ref")
WRITE = os.environ.get("GPUVIEWER_WRITE_RENDER_REF") == "1"
SIZE = (950, 420)  # the plot gets about 690 x 390 of it (the lane labels take 250)


@pytest.fixture(scope="module")
def traces(request):
    """Loaded once per module: the real traces, and 16 ranks (summary rows) made from one
    (conftest's ranks16, shared by the run)."""
    from gpuviewer.io.session import load

    got = {"ddp_clean": load([trace_path("kineto", "ddp_clean")]), "ddp": load([trace_path("kineto", "ddp")])}
    if os.path.exists(SCALE_TOOL):
        got["r16"] = load([request.getfixturevalue("ranks16")])
    return got


def _view(qtbot, trace):
    from gpuviewer.widgets.timeline_view import TimelineView

    v = TimelineView()
    qtbot.addWidget(v)
    v.resize(*SIZE)
    v.set_trace(trace)
    v.show()
    qtbot.waitExposed(v)
    # the plot as wide as when the references were drawn (686 px): the label column is sized to
    # its names now, with a 3 px splitter handle beside it
    v.split.setSizes([250 - v.split.handleWidth(), SIZE[0] - 250])
    v.plot.showAxis("bottom", True)  # (a view this short now drops the axis below the lanes)
    QApplication.processEvents()
    # from here on nothing runs the event loop: each _image() is exactly one paint
    return v


def _image(v) -> QImage:
    img = QImage(v.plot.size(), QImage.Format_ARGB32_Premultiplied)
    img.fill(0)
    QWidget.render(v.plot, img)
    return img


def _window(t):
    """A 5% window in the middle of the opening view, and its events."""
    from gpuviewer.model.view import initial_view

    v0, v1 = initial_view(t)
    span = max((v1 - v0) // 20, 1000)
    z0 = v0 + (v1 - v0) // 2 - span // 2
    c = t.columns
    start, dur = np.asarray(c["start"]), np.asarray(c["dur"])
    return z0, z0 + span, (start >= z0) & (start + dur <= z0 + span)


def _everything(v) -> None:
    """Every layer at once, overlapping: waits, steps, highlight, matches, selection,
    annotations (note, region, arrow), cursor, flows."""
    from gpuviewer.model.annotations import Annotation
    from gpuviewer.model.categories import Cat, LaneKind

    t = v.trace
    c = t.columns
    z0, z1, inside = _window(t)
    span = z1 - z0
    start, dur, cat, names = (np.asarray(c[k]) for k in ("start", "dur", "cat", "name"))
    v.set_range(z0, z1)
    # made-up waits (the first half of each collective kernel): what is drawn, not the analysis
    comm = np.flatnonzero(cat == Cat.COMM_KERNEL)
    v.item.set_comm_waits({int(i): {"wait_ns": 1, "wait_end_ns": int(start[i] + dur[i] // 2)} for i in comm})
    common = int(np.bincount(names[inside]).argmax())
    v.item.match_mask = names == common
    kern = np.flatnonzero(inside & (cat == Cat.KERNEL))
    v.select(int(kern[np.argmax(dur[kern])]))
    ranks = sorted({ln.rank for ln in t.lanes})
    v.item.highlight = (z0 + span // 4, z0 + span // 2, set(ranks))
    lane = next(ln.key for ln in t.lanes if ln.rank == ranks[-1] and ln.kind in (LaneKind.GPU, LaneKind.COMM))
    v.item.annotations = [
        Annotation("note", "a note on the rank", z0 + span * 3 // 10, rank=ranks[0]),
        Annotation("region", "the slow part", z0 + span * 4 // 10, z0 + span * 6 // 10, rank=ranks[-1], title="Region"),
        Annotation(
            "arrow",
            "waits for",
            z0 + span * 45 // 100,
            z0 + span * 55 // 100,
            rank=ranks[0],
            end_rank=ranks[-1],
            end_lane=lane,
        ),
        Annotation("note", "lane note", z0 + span * 7 // 10, rank=ranks[-1], lane=lane, color="#16a34a"),
    ]
    v.item.cursor_ns = z0 + span * 42 // 100


def _flows(v) -> None:
    """A kernel launch selected (its host lanes unfold) with the flow arrow to its kernel,
    steps off."""
    t = v.trace
    src, dst = t.flows
    z0, z1, _ = _window(t)
    start = np.asarray(t.columns["start"])
    k = [j for j, d in enumerate(dst) if z0 <= start[int(d)] <= z1]
    i = int(src[k[len(k) // 2]])
    v.select(i)
    v.set_range(int(start[i]) - 300_000, int(start[i]) + 300_000)
    v.scroll.setValue(0)
    v.item.show_steps = False


def _summary(v) -> None:
    """16 ranks, each one summary row, their steps, the whole capture."""
    v.fit_all()


SCENARIOS = {
    "ddp_clean_everything": ("ddp_clean", _everything),
    "ddp_flows": ("ddp", _flows),
    "r16_summary": ("r16", _summary),
    "r16_everything": ("r16", _everything),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_layers_draw_the_pixels_of_the_single_item(qtbot, traces, name):
    tname, setup = SCENARIOS[name]
    if tname not in traces:
        pytest.skip("no scale_trace.py to make 16 ranks")
    v = _view(qtbot, traces[tname])
    setup(v)
    first = _image(v)  # what a change draws: each layer draws and replays its calls
    again = _image(v)  # a repaint of the same view: kept layers put back (copied images)
    path = os.path.join(REF, name + ".png")
    if WRITE:
        os.makedirs(REF, exist_ok=True)
        assert first.save(path, "PNG", 0)
        pytest.skip(f"wrote {path}")
    ref = QImage(path).convertToFormat(QImage.Format_ARGB32_Premultiplied)
    assert not ref.isNull(), path
    assert first == ref
    assert again == ref


def test_reference_images_stay_small():
    files = [os.path.join(REF, f) for f in os.listdir(REF) if f.endswith(".png")]
    assert len(files) == len(SCENARIOS)
    assert sum(os.path.getsize(f) for f in files) < 300_000


def _counting(v) -> dict:
    """Wrap each layer's draw (what computes its geometry) to count the draws per layer."""
    counts = {}
    for layer in v.item.layers:
        name = type(layer).__name__
        counts[name] = 0

        def wrapped(p, f, _draw=layer.draw, _name=name):
            counts[_name] += 1
            return _draw(p, f)

        layer.draw = wrapped
    return counts


def _draws(v, counts: dict, change) -> dict:
    before = dict(counts)
    change()
    _image(v)
    return {k: n - before[k] for k, n in counts.items() if n - before[k]}


def test_a_change_redraws_its_layer_only_and_a_pan_redraws_all_once(qtbot, traces):
    from gpuviewer.model.categories import Cat

    v = _view(qtbot, traces["ddp_clean"])
    _everything(v)
    t = v.trace
    counts = _counting(v)
    _image(v)
    everything = {
        "SlicesItem": 1,
        "StepsItem": 1,
        "OverlayItem": 1,
        "SelectionItem": 1,
        "AnnotationsItem": 1,
        "CursorItem": 1,
    }
    assert _draws(v, counts, lambda: v.pan(0.05)) == everything
    assert _draws(v, counts, lambda: None) == {"CursorItem": 1}  # a repaint: the rest is kept
    c = t.columns
    z0, z1, inside = _window(t)
    other = int(np.flatnonzero(inside & (np.asarray(c["cat"]) == Cat.KERNEL))[0])  # on a shown lane
    # the selection (its box, and its flow arrows over the annotations)
    assert _draws(v, counts, lambda: v.select(other)) == {"SelectionItem": 1, "CursorItem": 1}
    # the memory cursor, as the window moves it (it also calls update(): a repaint of all)
    assert _draws(v, counts, lambda: (setattr(v.item, "cursor_ns", z0 + 1000), v.item.update())) == {"CursorItem": 1}
    # search matches, a finding's highlight
    names = np.asarray(c["name"])
    assert _draws(v, counts, lambda: setattr(v.item, "match_mask", names == names[other])) == {
        "OverlayItem": 1,
        "CursorItem": 1,
    }
    assert _draws(v, counts, lambda: setattr(v.item, "highlight", None)) == {"OverlayItem": 1, "CursorItem": 1}
    # an annotation; an annotation edited in place (the panel does that)
    from gpuviewer.model.annotations import Annotation

    anns = v.item.annotations + [Annotation("note", "one more", z0 + 5000)]
    assert _draws(v, counts, lambda: setattr(v.item, "annotations", anns)) == {"AnnotationsItem": 1, "CursorItem": 1}
    assert _draws(v, counts, lambda: setattr(anns[-1], "text", "edited")) == {"AnnotationsItem": 1, "CursorItem": 1}
    # steps off; collective waits; a change of the rows redraws every layer that has content
    assert _draws(v, counts, lambda: setattr(v.item, "show_steps", False)) == {"CursorItem": 1}
    assert _draws(v, counts, lambda: v.item.set_comm_waits({})) == {"SlicesItem": 1, "CursorItem": 1}
    rank = t.lanes[0].rank

    def collapse():
        v.layout_model.state.collapsed_ranks.add(rank)
        v.layout_model.rebuild()
        v._relayout()

    assert _draws(v, counts, collapse) == {
        "SlicesItem": 1,
        "OverlayItem": 1,
        "SelectionItem": 1,
        "AnnotationsItem": 1,
        "CursorItem": 1,
    }


def test_a_view_changed_step_by_step_draws_what_a_fresh_view_draws(qtbot, traces):
    """What a layer keeps is dropped when its state or the view changes: after each change the
    pixels are those of a new view set up with the same state in one go."""
    from gpuviewer.model.annotations import Annotation

    t = traces["ddp"]
    live = _view(qtbot, t)
    _everything(live)
    _image(live)
    _image(live)
    z0, z1, inside = _window(t)
    other = int(np.flatnonzero(inside)[len(np.flatnonzero(inside)) // 2])
    steps = [
        ("select", lambda v: v.select(other)),
        ("no selection", lambda v: v.select(None)),
        ("no matches", lambda v: setattr(v.item, "match_mask", None)),
        ("cursor", lambda v: setattr(v.item, "cursor_ns", z0 + (z1 - z0) // 3)),
        ("annotation", lambda v: setattr(v.item, "annotations", [Annotation("region", "r", z0, z0 + (z1 - z0) // 2)])),
        ("steps off", lambda v: setattr(v.item, "show_steps", False)),
        ("pan", lambda v: v.pan(0.1)),
        ("scroll", lambda v: v.scroll.setValue(v.scroll.maximum())),
    ]
    done = []
    for label, step in steps:
        step(live)
        done.append(step)
        _image(live)
        fresh = _view(qtbot, t)
        _everything(fresh)
        for s in done:
            s(fresh)
        assert _image(live) == _image(fresh), label


_SUBPIXEL_CONF = """<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig>
  <include ignore_missing="yes">/etc/fonts/fonts.conf</include>
  <match target="font">
    <edit name="antialias" mode="assign"><bool>true</bool></edit>
    <edit name="rgba" mode="assign"><const>rgb</const></edit>
  </match>
</fontconfig>
"""
_REPAINT = r"""
import os, sys
sys.path[:0] = [os.path.join(sys.argv[1], "tests"), os.path.join(sys.argv[1], "tests", "widgets")]
from PySide6.QtWidgets import QApplication
app = QApplication([])
import test_render_layers as t
from gpuviewer.io.session import load
class Bot:  # what _view needs of qtbot
    def addWidget(self, w): pass
    def waitExposed(self, w): app.processEvents()
v = t._view(Bot(), load([sys.argv[2]]))
t._everything(v)
first, again = t._image(v), t._image(v)
print("same" if first == again else "differ")
"""


def test_a_repaint_draws_the_text_of_the_first_paint_with_subpixel_antialiasing(tmp_path):
    """Where the desktop asks for subpixel antialiased text, Qt draws glyphs into an image unlike
    onto a window: layers with text are replayed, never copied, so a repaint keeps their look."""
    from conftest import ROOT

    conf = tmp_path / "fonts.conf"
    conf.write_text(_SUBPIXEL_CONF)
    env = dict(os.environ, FONTCONFIG_FILE=str(conf), QT_QPA_PLATFORM="offscreen", PYTHONPATH=ROOT)
    p = subprocess.run(
        [sys.executable, "-c", _REPAINT, ROOT, trace_path("kineto", "ddp_clean")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.stdout.strip().splitlines()[-1:] == ["same"], p.stdout[-2000:] + p.stderr[-2000:]
