"""`gpuviewer --install-desktop`: register the program and its file types for this user
(freedesktop: a .desktop entry, our shared-mime-info types, the icon, default handler)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from .resources import resources_dir

MIME_TYPES = [
    "application/x-nsys-rep",
    "application/x-nsys-sqlite",
    "application/x-pytorch-trace+json",
    "application/x-pytorch-trace+gzip",
    "application/x-chrome-trace+json",
    "application/x-chrome-trace+gzip",
]


def _launcher() -> str:
    """The command the desktop entry runs: the frozen binary, the installed script, or this
    interpreter with -m gpuviewer; quoted for the Exec key."""
    if getattr(sys, "frozen", False):
        cmd = [sys.executable]
    else:
        script = shutil.which("gpuviewer")
        here = os.path.dirname(sys.executable)
        if os.path.exists(os.path.join(here, "gpuviewer")):
            script = os.path.join(here, "gpuviewer")
        cmd = [script] if script else [sys.executable, "-m", "gpuviewer"]
    return " ".join(f'"{c}"' if " " in c else c for c in cmd)


def install_desktop(data_home: str | None = None, run_tools: bool = True) -> list[str]:
    res = resources_dir()
    if res is None:
        raise RuntimeError("cannot find the resources folder (gpuviewer.desktop, MIME types)")
    data = data_home or os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    apps = os.path.join(data, "applications")
    mime_pkgs = os.path.join(data, "mime", "packages")
    icons = os.path.join(data, "icons", "hicolor", "256x256", "apps")
    for d in (apps, mime_pkgs, icons):
        os.makedirs(d, exist_ok=True)
    done = []
    with open(os.path.join(res, "linux", "gpuviewer.desktop"), encoding="utf-8") as f:
        entry = f.read().replace("Exec=gpuviewer %F", f"Exec={_launcher()} %F")
    _atomic_write(os.path.join(apps, "gpuviewer.desktop"), entry)
    done.append(os.path.join(apps, "gpuviewer.desktop"))
    shutil.copyfile(os.path.join(res, "linux", "gpuviewer-mime.xml"), os.path.join(mime_pkgs, "gpuviewer.xml"))
    done.append(os.path.join(mime_pkgs, "gpuviewer.xml"))
    if os.path.exists(os.path.join(res, "gpuviewer.png")):
        shutil.copyfile(os.path.join(res, "gpuviewer.png"), os.path.join(icons, "gpuviewer.png"))
        done.append(os.path.join(icons, "gpuviewer.png"))
    if run_tools:
        env = dict(os.environ, XDG_DATA_HOME=data)
        for cmd in (
            ["update-mime-database", os.path.join(data, "mime")],
            ["update-desktop-database", apps],
            ["xdg-mime", "default", "gpuviewer.desktop", *MIME_TYPES],
        ):
            if shutil.which(cmd[0]):
                r = subprocess.run(cmd, env=env, capture_output=True, text=True)
                done.append(f"{' '.join(cmd[:2])}: {'ok' if r.returncode == 0 else r.stderr.strip()[:200]}")
            else:
                done.append(f"{cmd[0]}: not installed (install xdg-utils / shared-mime-info)")
    return done


def _atomic_write(path: str, text: str) -> None:
    from ..io.atomic import write_text

    write_text(path, text)
