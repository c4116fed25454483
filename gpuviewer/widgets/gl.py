"""OpenGL viewport only where the GL renderer is a real GPU: software GL (llvmpipe) measured
3-7x slower than raster here (engineering.md 1.1). A setting or GPUVIEWER_RENDERER forces it."""

from __future__ import annotations

import os

SOFTWARE = ("llvmpipe", "softpipe", "swiftshader", "software", "swrast", "virgl", "microsoft basic")


def gl_renderer_string() -> str | None:
    try:
        from PySide6.QtGui import QGuiApplication, QOffscreenSurface, QOpenGLContext

        if QGuiApplication.platformName() in ("offscreen", "minimal"):
            return None
        ctx = QOpenGLContext()
        if not ctx.create():
            return None
        surf = QOffscreenSurface()
        surf.create()
        if not ctx.makeCurrent(surf):
            return None
        f = ctx.functions()
        GL_RENDERER = 0x1F01
        s = f.glGetString(GL_RENDERER)
        ctx.doneCurrent()
        return s
    except Exception:  # noqa: BLE001 - no GL at all: raster
        return None


def want_opengl(mode: str | None = None) -> bool:
    mode = (mode or os.environ.get("GPUVIEWER_RENDERER") or "auto").lower()
    if mode == "raster":
        return False
    r = gl_renderer_string()
    if mode == "opengl":
        return r is not None
    return r is not None and not any(s in r.lower() for s in SOFTWARE)


def apply_renderer(plot, mode: str | None = None) -> bool:
    use = want_opengl(mode)
    if use:
        from PySide6.QtOpenGLWidgets import QOpenGLWidget

        plot.setViewport(QOpenGLWidget())
    else:
        from PySide6.QtWidgets import QWidget

        plot.setViewport(QWidget())
    return use
