""".nsys-rep / .qdrep: proprietary; only NVIDIA's `nsys export` turns them into SQLite."""
from __future__ import annotations

import os
import shutil
import subprocess

from .errors import TraceError


def export_reports(files: list[str], progress=None) -> list[str]:
    nsys = shutil.which("nsys")
    out = []
    for f in files:
        if not f.lower().endswith((".nsys-rep", ".qdrep")):
            out.append(f)
            continue
        if nsys is None:
            raise TraceError(f, "an .nsys-rep report needs NVIDIA Nsight Systems to export it. Run "
                                "`nsys export --type sqlite --output report.sqlite "
                                f"\"{os.path.basename(f)}\"` and open the .sqlite file")
        from .cache import cache_root, key_for
        dest_dir = os.path.join(os.path.dirname(cache_root()), "nsys-export")
        os.makedirs(dest_dir, exist_ok=True)
        dest = os.path.join(dest_dir, key_for([f]) + ".sqlite")
        if not os.path.exists(dest):
            if progress:
                progress(0.05, f"exporting {os.path.basename(f)} with nsys")
            tmp = dest + ".part"
            r = subprocess.run([nsys, "export", "--type", "sqlite", "--force-overwrite", "true",
                                "--output", tmp, f], capture_output=True, text=True)
            if r.returncode != 0 or not os.path.exists(tmp):
                raise TraceError(f, f"nsys export failed: {(r.stderr or r.stdout).strip()[:300]}")
            os.replace(tmp, dest)
        out.append(dest)
    return out
