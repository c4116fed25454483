"""model/, io/, analysis/ and the session (opening, alignment, analysis runs) must import and
run with Qt unavailable."""

import subprocess
import sys

CODE = r"""
import sys, importlib, pkgutil
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("PySide6", "pyqtgraph", "shiboken6", "PyQt5", "PyQt6"):
            raise ImportError("Qt is not allowed here: " + name)
sys.meta_path.insert(0, Block())
import gpuviewer
for pkg in ("gpuviewer.model", "gpuviewer.io", "gpuviewer.analysis"):
    m = importlib.import_module(pkg)
    for info in pkgutil.iter_modules(m.__path__):
        importlib.import_module(pkg + "." + info.name)
import gpuviewer.session, gpuviewer.session.analysis
t = gpuviewer.session.open_session([sys.argv[1]], use_cache=False)
assert gpuviewer.session.analysis.analyze_session(t).findings
print("ok")
"""


def test_core_packages_never_import_qt():
    from conftest import trace_path

    p = subprocess.run([sys.executable, "-c", CODE, trace_path("kineto", "ddp")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "ok"
