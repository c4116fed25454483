"""Light and dark colours for what we paint ourselves (timeline rows, lane labels, axes, plots);
standard widgets follow the application palette. The theme follows the OS setting (Qt 6.5+
style hints) unless GPUVIEWER_THEME=light|dark says otherwise. The slice colours work on both:
they are mid-tone, and a slice's text picks black or white by the slice's own lightness."""

from __future__ import annotations

import os
from dataclasses import dataclass

from PySide6.QtGui import QColor, QPalette


@dataclass(frozen=True)
class Theme:
    name: str
    background: QColor  # plots, the timeline
    panel: QColor  # lane labels
    header: QColor  # a rank's header row
    group: QColor  # a group row (lanes of one kind)
    text: QColor
    text_dim: QColor
    line: QColor  # axis lines, row separators
    step: QColor  # step boundaries
    ink: QColor  # selection outline, flow arrows
    # the timeline's own rows and marks
    row_header: QColor
    row_group: QColor
    wait: QColor  # laid over the part of a collective kernel spent waiting
    step_label: QColor
    flow: QColor
    axis_text: QColor


LIGHT = Theme(
    "light",
    QColor(255, 255, 255),
    QColor(250, 250, 251),
    QColor(226, 232, 240),
    QColor(241, 245, 249),
    QColor(20, 20, 20),
    QColor(110, 110, 110),
    QColor(150, 150, 150),
    QColor(90, 90, 90, 170),
    QColor(0, 0, 0),
    QColor(236, 239, 244),
    QColor(248, 250, 252),
    QColor(255, 255, 255, 150),
    QColor(60, 60, 60),
    QColor(30, 30, 30),
    QColor(90, 90, 90),
)
DARK = Theme(
    "dark",
    QColor(24, 26, 31),
    QColor(32, 34, 40),
    QColor(48, 54, 66),
    QColor(38, 42, 50),
    QColor(230, 232, 236),
    QColor(160, 165, 175),
    QColor(95, 100, 110),
    QColor(200, 205, 215, 150),
    QColor(255, 255, 255),
    QColor(40, 44, 54),
    QColor(30, 33, 40),
    QColor(24, 26, 31, 150),
    QColor(210, 212, 218),
    QColor(225, 228, 235),
    QColor(180, 185, 195),
)
_current = [LIGHT]


def current() -> Theme:
    return _current[0]


def use(theme: Theme) -> None:
    _current[0] = theme


def detect() -> Theme:
    """GPUVIEWER_THEME, else the OS colour scheme (light when unknown)."""
    env = os.environ.get("GPUVIEWER_THEME", "").strip().lower()
    if env in ("light", "dark"):
        return DARK if env == "dark" else LIGHT
    try:
        from PySide6.QtCore import Qt
        from PySide6.QtGui import QGuiApplication

        if QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark:
            return DARK
    except (AttributeError, RuntimeError):  # Qt before 6.5, or no application yet
        pass
    return LIGHT


def palette(theme: Theme) -> QPalette:
    """A Fusion palette for the dark theme (standard widgets: menus, tables, text)."""
    p = QPalette()
    if theme.name != "dark":
        return p
    base, window, text = QColor(30, 32, 38), QColor(40, 43, 50), theme.text
    for role, c in (
        (QPalette.Window, window),
        (QPalette.WindowText, text),
        (QPalette.Base, base),
        (QPalette.AlternateBase, QColor(36, 39, 46)),
        (QPalette.ToolTipBase, window),
        (QPalette.ToolTipText, text),
        (QPalette.Text, text),
        (QPalette.Button, window),
        (QPalette.ButtonText, text),
        (QPalette.BrightText, QColor(255, 90, 90)),
        (QPalette.Highlight, QColor(59, 130, 246)),
        (QPalette.HighlightedText, QColor(255, 255, 255)),
        (QPalette.Link, QColor(96, 165, 250)),
        (QPalette.PlaceholderText, theme.text_dim),
    ):
        p.setColor(role, c)
    p.setColor(QPalette.Disabled, QPalette.Text, theme.text_dim)
    p.setColor(QPalette.Disabled, QPalette.ButtonText, theme.text_dim)
    return p


def apply(app, theme: Theme | None = None) -> Theme:
    """Use the theme for our painting and the application's widgets."""
    theme = theme or detect()
    use(theme)
    if theme.name == "dark":
        app.setStyle("Fusion")
        app.setPalette(palette(theme))
    return theme
