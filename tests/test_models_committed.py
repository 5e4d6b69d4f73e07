"""The PyTorch exports under tests/models: each one the README lists is there, whole, and takes its inputs file.

They are test data written by ``tests/models/export.py`` (run by hand with
torch); this checks what later tests rely on: the weights file beside each
default export, inputs that match the graph's declared inputs, and that
onnxruntime runs each export from another working directory (all but the
one kept because onnxruntime refuses it).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest

MODELS = Path(__file__).resolve().parent / "models"
INVALID = {"gpt2_sdpa.op17.onnx"}  # torch's opset-17 export writes Split's opset-18 num_outputs
_NUMPY = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.INT64: np.int64}


def _listed() -> list[str]:
    """Every export the README's table lists, as file names."""
    rows = re.findall(r"^\| `(\w+)` \|[^|]*\| ([^|]*) \|", (MODELS / "README.md").read_text(), re.M)
    suffix = {"default": "", "`.legacy`": ".legacy", "`.op17`": ".op17"}
    return [f"{name}{suffix[kind.split(' (')[0].strip()]}.onnx" for name, kinds in rows for kind in kinds.split(", ")]


def test_the_readme_lists_every_committed_export() -> None:
    assert sorted(_listed()) == sorted(p.name for p in MODELS.glob("*.onnx"))


@pytest.mark.parametrize("name", _listed())
def test_export_takes_its_inputs(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = MODELS / name
    model = onnx.load(str(path), load_external_data=False)
    external = {e.value for t in model.graph.initializer for e in t.external_data if e.key == "location"}
    assert external == ({f"{path.stem}.onnx.data"} if "." not in path.stem else set())
    for location in external:
        assert (MODELS / location).stat().st_size > 0
    inputs = dict(np.load(MODELS / f"{path.stem.split('.')[0]}.inputs.npz"))
    declared = {i.name: i.type.tensor_type for i in model.graph.input}
    assert list(declared) == list(inputs)
    for key, tensor in declared.items():
        assert inputs[key].dtype == _NUMPY[tensor.elem_type], key
        assert inputs[key].shape == tuple(d.dim_value for d in tensor.shape.dim), key
    if name in INVALID:
        return
    import onnxruntime

    monkeypatch.chdir(tmp_path)  # the weights file resolves beside the model, not in the working directory
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    outputs = session.run(None, inputs)
    assert [o.name for o in session.get_outputs()] == [o.name for o in model.graph.output]
    assert all(np.isfinite(o).all() for o in outputs)
