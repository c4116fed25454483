"""Findings dock: by severity, filterable; choosing one takes the timeline there."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QLineEdit, QTextBrowser, QTreeWidget,
                               QTreeWidgetItem, QVBoxLayout, QWidget)

SEV_COLOR = {"high": QColor(220, 38, 38), "medium": QColor(217, 119, 6), "low": QColor(100, 116, 139)}


class FindingsPanel(QWidget):
    findingActivated = Signal(dict)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.findings: list[dict] = []
        self.severity = QComboBox()
        self.severity.addItems(["all severities", "high", "high + medium"])
        self.text = QLineEdit()
        self.text.setPlaceholderText("filter (rule, rank, words)")
        self.status = QLabel("")
        top = QHBoxLayout()
        top.addWidget(self.severity)
        top.addWidget(self.text, 1)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Severity", "Finding", "Rule", "Ranks", "Step"])
        self.tree.setRootIsDecorated(False)
        self.tree.setColumnWidth(0, 64)
        self.tree.setColumnWidth(1, 640)
        self.tree.setColumnWidth(2, 150)
        self.tree.setColumnWidth(3, 50)
        self.detail = QTextBrowser()
        from PySide6.QtWidgets import QSplitter
        split = QSplitter(Qt.Horizontal)
        split.addWidget(self.tree)
        split.addWidget(self.detail)
        split.setSizes([900, 420])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        top.addWidget(self.status)
        lay.addLayout(top)
        lay.addWidget(split, 1)
        self.severity.currentIndexChanged.connect(self._refill)
        self.text.textChanged.connect(self._refill)
        self.tree.currentItemChanged.connect(self._chosen)

    def set_findings(self, findings: list[dict]) -> None:
        self.findings = list(findings)
        self._refill()

    def set_busy(self, text: str) -> None:
        self.status.setText(text)

    def visible_findings(self) -> list[dict]:
        import re
        sev = self.severity.currentIndex()
        text = self.text.text().lower()
        want_ranks = {int(m) for m in re.findall(r"rank\s*(\d+)", text)}
        words = re.sub(r"rank\s*\d+", " ", text).split()
        out = []
        for f in self.findings:
            if sev == 1 and f["severity"] != "high":
                continue
            if sev == 2 and f["severity"] == "low":
                continue
            if want_ranks and not want_ranks & set(f["ranks"]):
                continue
            hay = f"{f['rule']} {f['title']} {f['severity']}".lower()
            if all(w in hay for w in words):
                out.append(f)
        return out

    def _refill(self) -> None:
        self.tree.clear()
        shown = self.visible_findings()
        for f in shown:
            it = QTreeWidgetItem([f["severity"], f["title"], f["rule"], ",".join(map(str, f["ranks"])),
                                  "" if f["step"] is None else str(f["step"])])
            it.setForeground(0, QBrush(SEV_COLOR.get(f["severity"], QColor(0, 0, 0))))
            it.setData(0, Qt.UserRole, f)
            it.setToolTip(1, f["title"])
            self.tree.addTopLevelItem(it)
        self.status.setText(f"{len(shown)} of {len(self.findings)} findings")

    def choose(self, row: int) -> None:
        it = self.tree.topLevelItem(row)
        if it is not None:
            self.tree.setCurrentItem(it)

    def _chosen(self, item, _prev=None) -> None:
        if item is None:
            return
        f = item.data(0, Qt.UserRole)
        metrics = "".join(f"<tr><td>{k}</td><td>{_fmt(v)}</td></tr>" for k, v in f["metrics"].items()
                          if not isinstance(v, (list, dict)))
        ev = f["metrics"].get("evidence") or f["metrics"].get("causes") or f["metrics"].get("host_activity") or []
        evid = "".join(f"<li>{_esc(e['name'])} — {e.get('excess_ms', e.get('ms'))} ms ({e['lane']})</li>" for e in ev[:5])
        self.detail.setHtml(f"<b>{_esc(f['title'])}</b><table>{metrics}</table>"
                            + (f"<p>Evidence:</p><ul>{evid}</ul>" if evid else "")
                            + f"<p><i>{_esc(f['advice'])}</i></p>")
        self.findingActivated.emit(f)


def _fmt(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
