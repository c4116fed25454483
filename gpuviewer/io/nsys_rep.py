""".nsys-rep / .qdrep: proprietary; only NVIDIA's `nsys export` turns them into SQLite."""

from __future__ import annotations

import os
import shutil
import subprocess

from .atomic import write_path
from .errors import Cancelled, TraceError


def export_reports(files: list[str], progress=None, cancelled=None) -> list[str]:
    nsys = shutil.which("nsys")
    out = []
    for f in files:
        if not f.lower().endswith((".nsys-rep", ".qdrep")):
            out.append(f)
            continue
        if nsys is None:
            raise TraceError(
                f,
                "an .nsys-rep report needs NVIDIA Nsight Systems to export it. Run "
                "`nsys export --type sqlite --output report.sqlite "
                f'"{os.path.basename(f)}"` and open the .sqlite file',
            )
        from .cache import cache_root, key_for

        dest_dir = os.path.join(os.path.dirname(cache_root()), "nsys-export")
        os.makedirs(dest_dir, exist_ok=True)
        key = key_for([f])
        dest = os.path.join(dest_dir, key + ".sqlite")
        if not os.path.exists(dest):
            if progress:
                progress(0.05, f"exporting {os.path.basename(f)} with nsys")

            def produce(tmp: str, f: str = f) -> bool:
                rc, err = _run(
                    [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", tmp, f], cancelled
                )
                if rc != 0 or not os.path.getsize(tmp):
                    msg = " ".join(err.split())[:300] or f"exit status {rc}"
                    raise TraceError(f, f"nsys export failed: {msg}")
                return True

            # ends in .sqlite, or nsys would add the suffix itself and the file would not be found;
            # a failed or cancelled export leaves nothing behind
            write_path(dest, produce, suffix=".sqlite")
        out.append(dest)
    return out


def _run(cmd: list[str], cancelled) -> tuple[int, str]:
    """Run nsys; Cancel ends it (an export of a big report takes minutes). Returns the exit
    status and what it said (stderr, else stdout)."""
    p = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, errors="replace"
    )
    while True:
        try:
            out, err = p.communicate(timeout=0.2)
            return p.returncode, (err or "").strip() or (out or "")
        except subprocess.TimeoutExpired:
            if cancelled is not None and cancelled():
                p.kill()
                p.communicate()
                raise Cancelled() from None
