"""Fuzzing the ONNX front end: damaged and unusual models and option values for ``run onnx``/``compile onnx``.

The classes (each a :class:`fuzz_support.Case` kind):

* ``onnx-initializer``: initializers whose bytes cannot be decoded (raw data
  of the wrong size, dims that disagree with the data, negative or huge dims,
  unknown or unsupported data types);
* ``onnx-external``: external data in all its forms: bad offset or length, a
  short, empty or missing data file, a location outside the model's folder
  (absolute, ``..``, a symlink out), a directory or a FIFO as data file, and
  valid models run from another directory that holds a decoy data file;
* ``onnx-types``: graphs onnxruntime would refuse for their types (float16,
  a uint8 zero point on int8 weights, int32 weights, mismatched outputs);
* ``onnx-qparams``: quantization parameters of an already quantized model:
  scale lengths, axes, signs, NaN/inf, types, zero-point shapes;
* ``onnx-graph``: graphs with no outputs, dangling outputs, unknown operators,
  unknown opsets;
* ``onnx-sizes``: sizes a run would allocate: huge static and ``--batch`` sizes;
* ``onnx-options``: every numeric option's range, output folders, repeated
  and out-of-range ``--input``.

Every case runs through :func:`fuzz_support.run_cases` (fresh directory,
in-process ``main()``, stderr of the process captured at the file
descriptor, a time limit), so the promises checked are those of docs/onnx.md ("Bad models and options").

``python tests/fuzz_onnx.py --inputs 650`` prints the counts per class.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz_support import Case, Outcome, counts, run_cases  # noqa: E402

#: Seconds an ONNX case may take: the models are tiny, a full run takes about a second.
ONNX_TIMEOUT = 40.0
KINDS = ("onnx-initializer", "onnx-external", "onnx-types", "onnx-qparams", "onnx-graph", "onnx-sizes",
         "onnx-options")


def _model_bytes(model: Any) -> bytes:
    return bytes(model.SerializeToString())


def mlp(batch: int | str = 1, *, seed: int = 0, dtype: int | None = None) -> Any:
    """x[batch, 16] -> Gemm 8 -> Relu -> Gemm 4: the smallest float network that runs whole."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1", transB=1),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], name="fc2", transB=1)]
    inits = [numpy_helper.from_array((rng.normal(size=(8, 16)) * 0.3).astype(np.float32), "w1"),
             numpy_helper.from_array((rng.normal(size=8) * 0.1).astype(np.float32), "b1"),
             numpy_helper.from_array((rng.normal(size=(4, 8)) * 0.3).astype(np.float32), "w2"),
             numpy_helper.from_array((rng.normal(size=4) * 0.1).astype(np.float32), "b2")]
    t = dtype if dtype is not None else TensorProto.FLOAT
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", t, [batch, 16])],
                              [helper.make_tensor_value_info("y", t, [batch, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def qdq(*, seed: int = 0) -> Any:
    """An already quantized (QDQ) Gemm: per-channel int8 weights, per-tensor int8 activations."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(rng.integers(-127, 128, (8, 16)).astype(np.int8), "wq"),
             numpy_helper.from_array(np.full(8, 0.01, np.float32), "ws"),
             numpy_helper.from_array(np.zeros(8, np.int8), "wz"),
             numpy_helper.from_array(np.array(0.05, np.float32), "xs"),
             numpy_helper.from_array(np.array(0, np.int8), "xz"),
             numpy_helper.from_array(np.array(0.1, np.float32), "ys"),
             numpy_helper.from_array(np.array(0, np.int8), "yz"),
             numpy_helper.from_array(np.zeros(8, np.float32), "b")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="qx"),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"], name="dqx"),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], name="dqw", axis=0),
             helper.make_node("Gemm", ["xd", "wd", "b"], ["h"], name="fc", transB=1),
             helper.make_node("QuantizeLinear", ["h", "ys", "yz"], ["hq"], name="qh"),
             helper.make_node("DequantizeLinear", ["hq", "ys", "yz"], ["y"], name="dqh")]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def tokens(*, seed: int = 0) -> Any:
    """ids[1, 4] (int64) -> Gather from a 32 x 16 embedding -> MatMul 8: token ids as an input."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(rng.normal(size=(32, 16)).astype(np.float32), "emb"),
             numpy_helper.from_array((rng.normal(size=(16, 8)) * 0.3).astype(np.float32), "w")]
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["e"], name="embed"),
             helper.make_node("MatMul", ["e", "w"], ["y"], name="proj")]
    graph = helper.make_graph(nodes, "tokens", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def externalize(model: Any, location: str = "m.onnx.data") -> tuple[Any, bytes]:
    """``model`` with every initializer moved to one data file (returned) at ``location``, 64-byte aligned."""
    from onnx import TensorProto

    data = bytearray()
    for t in model.graph.initializer:
        raw = t.raw_data if t.HasField("raw_data") else _raw(t)
        data += b"\0" * (-len(data) % 64)
        offset = len(data)
        data += raw
        t.ClearField("raw_data")
        t.ClearField("float_data")
        t.ClearField("int32_data")
        t.ClearField("int64_data")
        del t.external_data[:]
        for key, value in (("location", location), ("offset", str(offset)), ("length", str(len(raw)))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        t.data_location = TensorProto.EXTERNAL
    return model, bytes(data)


def _raw(t: Any) -> bytes:
    from onnx import numpy_helper

    return bytes(numpy_helper.to_array(t).tobytes())


def _set_external(t: Any, **change: str | None) -> None:
    """Change (or, with None, drop) keys of an external tensor's ``external_data``."""
    entries = {e.key: e.value for e in t.external_data}
    for k, v in change.items():
        if v is None:
            entries.pop(k, None)
        else:
            entries[k] = v
    del t.external_data[:]
    for k, v in entries.items():
        e = t.external_data.add()
        e.key, e.value = k, v


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


class OnnxInputs:
    """Deterministic generators of every ONNX input class (``seed`` fixes them all)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def choice(self, items: list[Any]) -> Any:
        return items[self.rng.randrange(len(items))]

    def _command(self, model: str = "m.onnx", *extra: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """A ``run onnx`` or ``compile onnx`` command line, and what it may write on success."""
        if self.rng.random() < 0.3:
            return ("compile", "onnx", model, "-o", "out", *extra), ("out",)
        return ("run", "onnx", model, *extra), ()

    def _case(self, kind: str, model: Any, files: dict[str, bytes] | None = None, *extra: str,
              name: str = "m.onnx") -> Case:
        argv, may = self._command(name, *extra)
        return Case(kind, argv, {name: _model_bytes(model), **(files or {})}, may_write=may)

    # -- damaged initializers
    def initializer(self) -> Case:
        from onnx import TensorProto

        model = self.choice([mlp, qdq, tokens])(seed=self.rng.randrange(4))
        t = self.choice(list(model.graph.initializer))
        raw = t.raw_data if t.HasField("raw_data") else _raw(t)
        how = self.rng.randrange(12)
        if how == 0:
            t.raw_data = raw[: self.rng.randrange(len(raw))]
        elif how == 1:
            t.raw_data = raw + b"\0" * self.rng.choice([1, 3, 4, 64])
        elif how == 2:
            t.raw_data = b""
        elif how == 3:
            del t.dims[:]
            t.dims.extend([self.rng.choice([0, 2, 3, 7, 100])] * self.rng.choice([1, 2, 3]))
        elif how == 4:
            del t.dims[:]
            t.dims.extend([self.rng.choice([-1, -8, -(2**40)]), 4])
        elif how == 5:
            del t.dims[:]
            t.dims.extend([2**self.rng.choice([31, 40, 62]), 2**self.rng.choice([1, 20, 30])])
        elif how == 6:
            t.data_type = self.choice([0, 8, 99, 17, 18, 19, 20, 21, 22, 23, 24, 25, 1000])
        elif how == 7:  # the values as float_data with the wrong count
            t.ClearField("raw_data")
            t.data_type = TensorProto.FLOAT
            t.float_data.extend([1.0] * self.rng.choice([0, 1, 5, 1000]))
        elif how == 8:
            t.ClearField("raw_data")
            t.int64_data.extend([1, 2, 3])
        elif how == 9:  # raw data and typed data both
            t.float_data.extend([1.0, 2.0])
        elif how == 10:
            t.data_type = self.choice([TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.INT16, TensorProto.UINT64])
        else:
            t.raw_data = os.urandom(len(raw)) if raw else b"\x7f"
            t.data_type = TensorProto.FLOAT
        return self._case("onnx-initializer", model)

    # -- external data
    def external(self) -> Case:
        model = self.choice([mlp, qdq, tokens])(seed=self.rng.randrange(4))
        model, data = externalize(model)
        inits = list(model.graph.initializer)
        t = self.choice(inits)
        length = int(next(e.value for e in t.external_data if e.key == "length"))
        files: dict[str, bytes] = {}
        name = "m.onnx"
        how = self.rng.randrange(24)
        extra: tuple[str, ...] = ()
        if how == 0:
            _set_external(t, offset=str(len(data) + self.rng.choice([0, 1, 4096, 2**40])))
        elif how == 1:
            _set_external(t, length=str(self.rng.choice([2048, length + 1, length * 4, 2**62])))
        elif how == 2:
            data = data[: self.rng.randrange(max(len(data), 1))]
        elif how == 3:
            data = b""
        elif how == 4:
            data = None  # type: ignore[assignment]
        elif how == 5:
            _set_external(t, location=self.choice(["/etc/passwd", "/dev/zero", "/dev/urandom", "/proc/self/mem",
                                                   "/tmp/../etc/hostname"]))
        elif how == 6:
            _set_external(t, location=self.choice(["../m.onnx.data", "sub/../../m.onnx.data", "../../etc/passwd"]))
        elif how == 7:  # the model in a folder, its data beside it; a decoy data file where the command runs
            files["model/m.onnx.data"] = data
            files["m.onnx.data"] = os.urandom(len(data))
            name = "model/m.onnx"
            data = None  # type: ignore[assignment]
        elif how == 8:  # a symlink pointing out of the model's folder
            files["outside/m.onnx.data"] = data
            name = "model/m.onnx"
            _set_external(t, location="link.data")
            files["model/m.onnx.data"] = data
            files["@link model/link.data"] = b"../outside/m.onnx.data"
            data = None  # type: ignore[assignment]
        elif how == 9:
            files["@dir m.onnx.data"] = b""
            data = None  # type: ignore[assignment]
        elif how == 10:
            files["@fifo m.onnx.data"] = b""
            data = None  # type: ignore[assignment]
        elif how == 11:
            _set_external(t, offset=self.choice(["-1", "abc", "1.5", "", "0x10", str(2**64)]))
        elif how == 12:
            _set_external(t, length=self.choice(["-1", "abc", "", "1e3", str(2**70)]))
        elif how == 13:
            _set_external(t, location=None)
        elif how == 14:
            _set_external(t, location="")
        elif how == 15:
            _set_external(t, checksum="0" * 40)
        elif how == 16:
            _set_external(t, somekey="x")
        elif how == 17:
            _set_external(t, location="m.onnx")  # the model file itself as its data
        elif how == 18:  # the length does not match the shape
            _set_external(t, length=str(max(length - 4, 0)))
        elif how == 19:  # the default exporter's layout, from another directory
            name = "model/m.onnx"
            files["model/m.onnx.data"] = data
            data = None  # type: ignore[assignment]
        elif how == 20:
            _set_external(t, location="nested/deeper/m.onnx.data")
        elif how == 21:
            _set_external(t, location="m.onnx.data\0x")
        elif how == 22:  # run with a relative path from a subdirectory
            files["run/.keep"] = b""
            extra = ("--config", "default")
        else:
            _set_external(t, location="a" * 300)
        if data is not None:
            files[str(Path(name).parent / "m.onnx.data") if "/" in name else "m.onnx.data"] = data
        return self._case("onnx-external", model, files, *extra, name=name)

    # -- inconsistent types
    def types(self) -> Case:
        from onnx import TensorProto, helper, numpy_helper

        how = self.rng.randrange(9)
        if how == 0:  # a float16 model
            model = mlp(dtype=TensorProto.FLOAT16)
            for t in model.graph.initializer:
                a = numpy_helper.to_array(t).astype(np.float16)
                t.CopyFrom(numpy_helper.from_array(a, t.name))
        elif how == 1:  # a uint8 zero point on int8 weights
            model = qdq()
            for t in model.graph.initializer:
                if t.name == self.choice(["wz", "xz", "yz"]):
                    t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.uint8), t.name))
        elif how == 2:  # int32 weights
            model = mlp()
            t = model.graph.initializer[self.choice([0, 2])]
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.int32), t.name))
        elif how == 3:  # the declared output type disagrees
            model = mlp()
            model.graph.output[0].type.tensor_type.elem_type = self.choice([TensorProto.INT64, TensorProto.INT8,
                                                                            TensorProto.DOUBLE])
        elif how == 4:  # a float64 model
            model = mlp(dtype=TensorProto.DOUBLE)
            for t in model.graph.initializer:
                t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
        elif how == 5:  # int8 input into a float Gemm
            model = mlp()
            model.graph.input[0].type.tensor_type.elem_type = self.choice([TensorProto.INT8, TensorProto.UINT8,
                                                                           TensorProto.INT32, TensorProto.BOOL])
        elif how == 6:  # a scale of the wrong type
            model = qdq()
            for t in model.graph.initializer:
                if t.name == self.choice(["ws", "xs", "ys"]):
                    t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
        elif how == 7:  # a bias of the wrong type
            model = mlp()
            t = model.graph.initializer[self.choice([1, 3])]
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.int64), t.name))
        else:  # a Cast into the middle of a float chain
            model = mlp()
            model.graph.node.insert(1, helper.make_node("Cast", ["h"], ["hc"], name="cast",
                                                        to=self.choice([TensorProto.INT8, TensorProto.FLOAT16])))
            model.graph.node[2].input[0] = "hc"
        return self._case("onnx-types", model)

    # -- quantization parameters
    def qparams(self) -> Case:
        from onnx import numpy_helper

        model = qdq(seed=self.rng.randrange(4))
        inits = {t.name: t for t in model.graph.initializer}
        nodes = {n.name: n for n in model.graph.node}
        how = self.rng.randrange(10)

        def put(name: str, value: np.ndarray) -> None:
            inits[name].CopyFrom(numpy_helper.from_array(value, name))

        if how == 0:  # scale length not that of the axis
            put("ws", np.full(self.choice([3, 7, 9, 16]), 0.01, np.float32))
        elif how == 1:
            nodes["dqw"].attribute[0].i = self.choice([2, 5, -3, -9, 2**40])
        elif how == 2:
            put(self.choice(["ws", "xs", "ys"]), np.array(self.choice([0.0, -0.1, np.nan, np.inf, -np.inf, 1e-45]),
                                                          np.float32) * np.ones(
                8 if self.rng.random() < 0.5 else 1, np.float32).reshape(-1)[:1].reshape(()))
        elif how == 3:  # per-channel scale with one bad channel
            bad = np.full(8, 0.01, np.float32)
            bad[self.rng.randrange(8)] = self.choice([0.0, -1.0, np.nan, np.inf])
            put("ws", bad)
        elif how == 4:  # zero point shape not the scale's
            put("wz", np.zeros(self.choice([1, 3, 16]), np.int8))
        elif how == 5:  # zero point of another integer type
            put(self.choice(["wz", "xz"]), np.zeros(8 if self.rng.random() < 0.5 else (), np.int32))
        elif how == 6:  # a 2-D scale
            put("ws", np.full((8, 1), 0.01, np.float32))
        elif how == 7:  # the scale is not a constant: a graph input
            from onnx import TensorProto, helper

            model.graph.initializer.remove(inits["xs"])
            model.graph.input.append(helper.make_tensor_value_info("xs", TensorProto.FLOAT, []))
        elif how == 8:  # a per-tensor scale given the per-channel axis of a rank-0 input
            nodes["qx"].attribute.extend([__import__("onnx").helper.make_attribute("axis", 3)])
            put("xs", np.full(16, 0.05, np.float32))
        else:  # zero points out of range of the quantized type
            put("wz", np.full(8, self.choice([-128, 127]), np.int8))
        return self._case("onnx-qparams", model)

    # -- graphs
    def graph(self) -> Case:
        from onnx import TensorProto, helper

        model = self.choice([mlp, qdq, tokens])()
        how = self.rng.randrange(9)
        if how == 0:
            del model.graph.output[:]
        elif how == 1:
            model.graph.output[0].name = "nowhere"
        elif how == 2:  # several unsupported operators at once
            out = model.graph.output[0].name
            last = model.graph.node[-1]
            last.output[0] = "pre"
            model.graph.node.extend([helper.make_node("CumSum", ["pre", "ax"], ["c1"], name="sum1"),
                                     helper.make_node("CumSum", ["c1", "ax"], ["c2"], name="sum2"),
                                     helper.make_node("Sin", ["c2"], [out], name="sine")])
            model.graph.initializer.append(helper.make_tensor("ax", TensorProto.INT64, [], [1]))
        elif how == 3:
            del model.opset_import[:]
            model.opset_import.append(helper.make_opsetid("", self.choice([0, 1, 30, 99, 2**40])))
        elif how == 4:
            model.ir_version = self.choice([0, 1, 3, 99, 2**40])
        elif how == 5:  # a node reading a tensor nothing writes
            model.graph.node[-1].input[0] = "ghost"
        elif how == 6:  # two nodes writing one tensor
            model.graph.node[0].output[0] = model.graph.node[-1].output[0]
        elif how == 7:
            model.graph.node[0].domain = self.choice(["com.example", "com.microsoft"])
        else:  # a cycle
            first = model.graph.node[0]
            first.input[0] = model.graph.node[-1].output[0]
        return self._case("onnx-graph", model)

    # -- sizes
    def sizes(self) -> Case:
        how = self.rng.randrange(5)
        if how == 0:
            return self._case("onnx-sizes", mlp("N"), None, "--batch", str(self.choice([10**6, 10**9, 2**31, 2**40])))
        if how == 1:
            model = mlp()
            dims = model.graph.input[0].type.tensor_type.shape.dim
            dims[0].dim_value = self.choice([10**6, 10**9, 2**40])
            model.graph.output[0].type.tensor_type.shape.dim[0].dim_value = dims[0].dim_value
            return self._case("onnx-sizes", model)
        if how == 2:  # a wide first layer: the weights would be huge
            n = self.choice([2**20, 2**30, 2**40])
            model = mlp()
            w1 = model.graph.initializer[0]
            del w1.dims[:]
            w1.dims.extend([8, n])
            w1.raw_data = b""
            return self._case("onnx-sizes", model)
        if how == 3:
            return self._case("onnx-sizes", mlp("N"), None, "--batch", str(self.choice([4096, 65536, 10**5])),
                              "--calibrate", str(self.choice([1000, 10**5])))
        return self._case("onnx-sizes", mlp(), None, "--calibrate", str(self.choice([10**6, 10**9])))

    # -- option values
    def _number(self) -> str:
        return str(self.choice([0, 1, -1, -(2**63), 2**31, 2**32, 2**63, 2**64, 10**40, 10**9, "1e3", "abc", "",
                                "0x10", " 5", "3.0", "9" * 5000]))

    def options(self) -> Case:
        files: dict[str, bytes] = {}
        how = self.rng.randrange(10)
        model = mlp("N" if how == 0 else 1)
        if how == 0:
            extra: tuple[str, ...] = ("--batch", self._number())
        elif how == 1:
            extra = ("--calibrate", self._number())
        elif how == 2:
            extra = ("--random-weights", self._number())
        elif how == 3:
            return Case("onnx-options", ("run", "onnx", "m.onnx", "--seed", self._number()),
                        {"m.onnx": _model_bytes(model)})
        elif how == 4:
            return Case("onnx-options", ("run", "onnx", "m.onnx", "--compare", self._number()),
                        {"m.onnx": _model_bytes(model)})
        elif how == 5:  # output folders
            out = self.choice(["", "a" * 300, "dangling", "x/" + "b" * 256, "m.onnx", "/proc/out", "-"])
            files = {"@link dangling": b"nowhere/target"} if out == "dangling" else {}
            return Case("onnx-options", ("compile", "onnx", "m.onnx", "-o", out),
                        {"m.onnx": _model_bytes(model), **files}, may_write=(out,) if out else ())
        elif how == 6:  # repeated --input
            x = _npy(np.zeros((1, 16), np.float32))
            return Case("onnx-options", ("run", "onnx", "m.onnx", "--input", "x=a.npy", "--input", "x=b.npy"),
                        {"m.onnx": _model_bytes(model), "a.npy": x, "b.npy": x})
        elif how == 7:  # token ids out of range
            ids = np.array([[self.choice([32, 33, -33, 2**40, -(2**62), 1000]), 0, 1, 2]], np.int64)
            return Case("onnx-options", ("run", "onnx", "m.onnx", "--input", "ids=ids.npy"),
                        {"m.onnx": _model_bytes(tokens()), "ids.npy": _npy(ids)})
        elif how == 8:  # an input of the wrong dtype or with NaN
            arr = self.choice([np.zeros((1, 16), np.float64), np.full((1, 16), np.nan, np.float32),
                               np.zeros((1, 16), np.complex64), np.zeros((1, 16), np.int64),
                               np.full((1, 16), np.inf, np.float32)])
            return Case("onnx-options", ("run", "onnx", "m.onnx", "--input", "x=x.npy"),
                        {"m.onnx": _model_bytes(model), "x.npy": _npy(arr)})
        else:
            extra = ("--config", self.choice(["nosuch", "fp32", "", "m.onnx", "/dev/null"]))
        argv, may = self._command("m.onnx", *extra)
        return Case("onnx-options", argv, {"m.onnx": _model_bytes(model), **files}, may_write=may)

    def generators(self) -> dict[str, Callable[[], Case]]:
        return {"onnx-initializer": self.initializer, "onnx-external": self.external, "onnx-types": self.types,
                "onnx-qparams": self.qparams, "onnx-graph": self.graph, "onnx-sizes": self.sizes,
                "onnx-options": self.options}


def onnx_cases(count: int, seed: int = 0, kinds: tuple[str, ...] = KINDS) -> list[Case]:
    """``count`` ONNX cases spread over ``kinds``, the same for the same ``seed``."""
    inputs = OnnxInputs(seed)
    gens = inputs.generators()
    return [gens[kinds[i % len(kinds)]]() for i in range(count)]


def run_onnx_cases(cases: list[Case]) -> list[Outcome]:
    return run_cases(cases, timeout=ONNX_TIMEOUT)


def summary_by_kind(results: list[Outcome]) -> str:
    lines = []
    total = counts(results)
    lines.append(f"onnx fuzz: {len(results)} inputs: {total['traceback']} tracebacks, {total['crash']} crashes, "
                 f"{total['hang']} hangs, {total['violation']} not one paragraph (or other broken promises); "
                 f"{total['error']} clean errors, {total['ok']} successes")
    by_kind: dict[str, Counter[str]] = {}
    for r in results:
        by_kind.setdefault(r.case.kind, Counter())[r.outcome] += 1
    for kind in sorted(by_kind):
        c = by_kind[kind]
        lines.append(f"  {kind:17} " + ", ".join(f"{k} {c[k]}" for k in ("ok", "error", "traceback", "crash", "hang",
                                                                          "violation")))
    bad = [r for r in results if r.outcome in ("traceback", "crash", "hang", "violation")]
    lines += [f"  {r.outcome}: {r.case.describe()}\n    {r.detail[-500:]}" for r in bad[:60]]
    return "\n".join(lines)


def _cli() -> int:
    parser = argparse.ArgumentParser(description="Fuzz `tinynpu run/compile onnx` with damaged models and option "
                                                 "values; print the counts per class.")
    parser.add_argument("--inputs", type=int, default=650, help="how many inputs (default 650)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the inputs (default 0)")
    parser.add_argument("--kind", action="append", choices=KINDS, help="only these classes (default: all)")
    args = parser.parse_args()
    cases = onnx_cases(args.inputs, args.seed, tuple(args.kind or KINDS))
    results = run_cases(cases, timeout=ONNX_TIMEOUT,
                        progress=lambda n: print(f"\r{n}/{len(cases)}", end="", file=sys.stderr, flush=True))
    print(file=sys.stderr)
    print(summary_by_kind(results))
    c = counts(results)
    return 1 if c["traceback"] or c["crash"] or c["hang"] or c["violation"] else 0


if __name__ == "__main__":
    sys.exit(_cli())
