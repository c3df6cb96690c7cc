"""examples/audit.ipynb runs top to bottom (its last cell asserts what the audit shows)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "audit.ipynb"


def test_audit_notebook_runs(tmp_path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code"
               for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    html = [o for o in outputs if "text/html" in o.get("data", {})]
    assert any("rows_written" in o["data"]["text/html"] for o in html)  # CommitResult as HTML
    # the commit, the error table's stats, the table and the report draw their charts
    charts = [o["data"]["text/html"].count('class="ms-svg"') for o in html]
    assert len([c for c in charts if c]) >= 4 and max(charts) >= 10, charts
    assert "audit consistent" in "".join(o.get("text", "") for o in outputs)
