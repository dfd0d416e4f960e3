"""Every notebook runs top to bottom on the shipped captures, and is stored without outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
nbformat = pytest.importorskip("nbformat")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_stored_without_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path: Path) -> None:
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=None, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert errors == []
    # every notebook opens on real captures: its first cell shows the loaded Capture(s)
    first = next(c for c in nb.cells if c.cell_type == "code")
    text = "".join(o.get("data", {}).get("text/plain", "") for o in first.outputs)
    if path.name != "04-protocol-overhead.ipynb":  # its first cell shows the overhead table
        assert "Capture" in text and "frames" in text
    else:
        assert "goodput_ratio" in text
    # and every code cell produced output (a table, a chart or a repr)
    assert all(c.outputs for c in nb.cells if c.cell_type == "code")
    # and nothing on stderr (a pandas FutureWarning, say)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert [o.text for o in outputs if o.output_type == "stream" and o.name == "stderr"] == []
    charts = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(charts) >= 1  # every notebook draws at least one chart
    if path.name == "04-protocol-overhead.ipynb":  # its headline columns name the protocols
        assert text.splitlines()[0].split() == ["HTTP/1.1", "HTTP/2"]
