"""model/, io/ and analysis/ must import with Qt unavailable."""
import subprocess
import sys

CODE = r'''
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
print("ok")
'''


def test_core_packages_never_import_qt():
    p = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "ok"
