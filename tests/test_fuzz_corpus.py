"""The bad inputs that once crashed, hung or printed a traceback: each now ends in one clear paragraph.

Every case runs the real command line in a fresh directory (see ``fuzz_support.run_one``) and must end
the way the README promises: exit code, one paragraph saying what and where, no traceback, no warning,
and no file changed.
"""

from __future__ import annotations

import importlib.util
import json
import struct
import zlib

import numpy as np
import pytest
from fuzz_support import Case, Inputs, run_one

INPUTS = Inputs(0)
SEED_S = INPUTS.seed_s
SIM = {"seed.bin": INPUTS.seed_bin, "a.npy": INPUTS.a, "b.npy": INPUTS.b}
SIM_ARGV = ("sim", "seed.bin", "--input", "A=a.npy", "--input", "B=b.npy")
CONFIG = INPUTS.config.decode()
MM16 = ("--m", "16", "--n", "16", "--k", "16")
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(9))


def _asm(line: str | bytes, **files: bytes) -> Case:
    extra = line.encode() if isinstance(line, str) else line
    return Case("assembly", ("asm", "src.s", "-o", "out.bin"), {"src.s": SEED_S + b"\n" + extra + b"\n", **files},
                may_write=("out.bin",))


def _npy(array: np.ndarray | bytes, *argv: str) -> Case:
    data = array if isinstance(array, bytes) else _save(array)
    return Case("npy", argv or (*SIM_ARGV, "--output", "C=c.npy"), {**SIM, "a.npy": data}, may_write=("c.npy",))


def _save(array: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def _header(shape: str) -> bytes:
    hdr = f"{{'descr': '|i1', 'fortran_order': False, 'shape': {shape}, }}".encode()
    hdr += b" " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr + b"\0" * 64


def _manifest(text: str) -> bytes:
    seed = INPUTS.seed_bin
    words_end = 48 + 16 * struct.unpack_from("<I", seed, 40)[0]
    body = seed[48:words_end] + text.encode()
    head = bytearray(seed[:48])
    struct.pack_into("<I", head, 44, zlib.crc32(body))
    return bytes(head) + body


def _tensors(**change: object) -> str:
    seed = INPUTS.seed_bin
    tensors = json.loads(seed[48 + 16 * struct.unpack_from("<I", seed, 40)[0]:])["tensors"]
    tensors[0].update(change)
    return json.dumps({"tensors": tensors})


def _config(text: str, *argv: str) -> Case:
    argv = argv or ("isa", "check", "--config", "cfg.yaml")
    return Case("config", argv, {**SIM, "seed.s": SEED_S, "cfg.yaml": text.encode()})


def _schedule(data: bytes) -> Case:
    return Case("schedule", ("run", "matmul", "--m", "32", "--n", "32", "--k", "32", "--schedule", "s.json"),
                {"s.json": data})


# (case, what the error paragraph must say); grouped by the items
CORPUS: dict[str, tuple[Case, str]] = {
    # 6: hangs with memory growing
    "asm /dev/zero": (Case("assembly", ("asm", "/dev/zero", "-o", "out.bin")), "a device, not a regular file"),
    "include /dev/zero": (_asm('.include "/dev/zero"'), "a device, not a regular file"),
    "include /dev/urandom": (_asm('.include "/dev/urandom"'), "a device, not a regular file"),
    "huge shift": (_asm(".equ X, 1 << 100000000000"), "must fit in 32 bits"),
    "repeated squaring": (_asm(".equ X, 65536\n.equ Y, X*X*X*X*X*X*X*X\n.equ Z, Y*Y*Y*Y*Y*Y*Y*Y"),
                          "must fit in 32 bits"),
    "alias bomb: isa check": (_config(BOMB + CONFIG), "expand to more than"),
    "alias bomb: asm": (_config(BOMB + CONFIG, "asm", "seed.s", "--config", "cfg.yaml", "-o", "o.bin"),
                        "expand to more than"),
    "alias bomb: run": (_config(BOMB + CONFIG, "run", "matmul", *MM16, "--config", "cfg.yaml"), "expand to more"),
    "alias bomb: sim": (_config(BOMB + CONFIG, "sim", "seed.bin", "--config", "cfg.yaml"), "expand to more"),
    "tune --n 1e9": (Case("numbers", ("tune", "matmul", "--m", "16", "--n", "1000000000", "--k", "16")),
                     "does not fit DRAM"),
    "tune --trials 1e9": (Case("numbers", ("tune", "matmul", *MM16, "--trials", "1000000000")), "at most 100,000"),
    # 7: assembler tracebacks
    "5000-digit literal": (_asm(".equ X, " + "9" * 5000), "numbers have at most 256"),
    "5000-digit literal on an instruction line": (_asm("sync wait=" + "9" * 5000), "numbers have at most 256"),
    "1000 nested (": (_asm(".equ X, " + "(" * 1000 + "1" + ")" * 1000), "nest more than 64 deep"),
    "1000 -": (_asm(".equ X, " + "-" * 1001 + "1\n.equ Y, X +"), "expected a number"),
    "1000 ~": (_asm(".equ X, " + "~" * 1000 + "1\nnonsense here"), "unknown mnemonic 'nonsense'"),
    "non-UTF-8 include": (_asm('.include "bad.s"', **{"bad.s": b"load \xff\n"}), "is not UTF-8 text"),
    # 8: .npy inputs
    "empty npy": (_npy(b""), "not a valid .npy file"),
    "corrupt npy header": (_npy(_save(np.zeros((32, 32), np.int8)).replace(b"'shape': (32, 32)", b"'shape': (32, 3(")),
                           "not a valid .npy file"),
    "corrupt npy header through cosim": (_npy(_save(np.zeros((32, 32), np.int8)).replace(b"(32, 32)", b"(32, 3("),
                                              "cosim", "seed.bin", "--input", "A=a.npy"), "not a valid .npy file"),
    "huge npy shape": (_npy(_header("(1000000000, 1000000000)")), "the header promises shape"),
    "str npy": (_npy(np.zeros((32, 32), "U3")), "tensors take bool, integer or float"),
    "bytes npy": (_npy(np.zeros((32, 32), "S3")), "tensors take bool, integer or float"),
    "void npy": (_npy(np.zeros((32, 32), "V4")), "tensors take bool, integer or float"),
    "NaN": (_npy(np.full((32, 32), np.nan)), "do not fit"),
    "inf": (_npy(np.full((32, 32), np.inf)), "do not fit"),
    "1e30": (_npy(np.full((32, 32), 1e30)), "do not fit"),
    "complex": (_npy(np.full((32, 32), 1 + 1j)), "tensors take bool, integer or float"),
    # 9: output paths
    "--output C=/tmp": (Case("outputs", (*SIM_ARGV, "--output", "C=/tmp"), SIM), "a directory"),
    "compile -o /proc/x": (Case("outputs", ("compile", "matmul", *MM16, "-o", "/proc/x")), "/proc"),
    "report -o file/sub": (Case("outputs", ("report", "matmul", *MM16, "-o", "f/sub"), {"f": b"mine"}),
                           "Not a directory"),
    # 10: schedule JSON and manifests
    "non-UTF-8 schedule": (_schedule(b"\xff\xfe{}"), "is not UTF-8 text"),
    "schedule nested 100,000 deep": (_schedule(b"[" * 100000 + b"]" * 100000), "nests too deep"),
    "manifest addr Infinity": (Case("manifest", SIM_ARGV, {**SIM, "seed.bin": _manifest(_tensors(addr=float("inf")))}),
                               "the manifest is not valid"),
    "manifest name is a list": (Case("manifest", SIM_ARGV, {**SIM, "seed.bin": _manifest(_tensors(name=["A"]))}),
                                "the manifest is not valid"),
    "manifest nested deep": (Case("manifest", SIM_ARGV, {**SIM, "seed.bin": _manifest("[" * 100000)}),
                             "nests too deep"),
    "disasm overlapping tensors": (Case("manifest", ("disasm", "seed.bin"),
                                        {"seed.bin": _manifest(_tensors(addr=1024))}), "overlap in DRAM"),
    "disasm duplicate tensors": (Case("manifest", ("disasm", "seed.bin"),
                                      {"seed.bin": _manifest(_tensors(name="B"))}), "must be unique"),
    "disasm tensor beyond DRAM": (Case("manifest", ("disasm", "seed.bin"),
                                       {"seed.bin": _manifest(_tensors(addr=(64 << 20) - 16))}), "beyond the"),
    # 11: config YAML
    "config NUL": (_config(CONFIG.replace("tile:", "ti\0le:")), "a NUL byte"),
    # 65 levels (the document itself is one): the project's own check; 5000: PyYAML's (1,000 levels)
    # fires first, reworded to the same rule
    "config nested 65 deep": (_config(CONFIG + "deep: " + "[" * 65 + "]" * 65 + "\n"),
                              f"cfg.yaml:{CONFIG.count(chr(10)) + 1}:70: not valid here: mappings and lists nest"),
    "config nested 5000 deep": (_config(CONFIG + "deep: " + "[" * 5000 + "]" * 5000 + "\n"),
                                f"cfg.yaml:{CONFIG.count(chr(10)) + 1}:"),
    "config nested 5000 deep, the rule": (_config(CONFIG + "deep: " + "[" * 5000 + "]" * 5000 + "\n"),
                                          "not valid here: mappings and lists nest more than 64 deep."),
    "rows: 2048.0": (_config(CONFIG.replace("rows: 2048", "rows: 2048.0", 1),
                             "run", "matmul", *MM16, "--config", "cfg.yaml"), "is not of type 'integer'"),
    "duplicate key": (_config(CONFIG + "tile: 16\n"), "duplicate key 'tile' (first at line"),
    # 12: CLI numbers
    "tune --n 0": (Case("numbers", ("tune", "matmul", "--m", "16", "--n", "0", "--k", "16")), "positive integer"),
    "tune --n -5": (Case("numbers", ("tune", "matmul", "--m", "16", "--n", "-5", "--k", "16")), "positive integer"),
    "tune --seed -1": (Case("numbers", ("tune", "matmul", *MM16, "--seed", "-1")), "--seed must be"),
    "run --seed -1": (Case("numbers", ("run", "matmul", *MM16, "--seed", "-1")), "--seed must be"),
    "run --m 2**62": (Case("numbers", ("run", "matmul", "--m", str(2**62), "--n", "16", "--k", "16")),
                      "does not fit DRAM"),
    "tune --trials 0": (Case("numbers", ("tune", "matmul", *MM16, "--trials", "0")), "at least 1"),
    "tune --simulate-best -1": (Case("numbers", ("tune", "matmul", *MM16, "--simulate-best", "-1")), "at least 1"),
    "run --shift 2**64": (Case("numbers", ("run", "matmul", *MM16, "--out-dtype", "int8", "--shift", str(2**64))),
                          "must be in 0..31"),
    # 14: cycle limits that would wrap the native core's 64-bit counter
    "--max-cycles 2**63": (Case("numbers", (*SIM_ARGV, "--max-cycles", str(2**63)), SIM),
                           "at most 4611686018427387904"),
    "limits.max_cycles 2**63": (_config(CONFIG.replace("max_cycles:", f"max_cycles: {2**63} #")),
                                "greater than the maximum"),
}


def _onnx_cases() -> dict[str, tuple[Case, str]]:
    """15: ONNX models and options that once gave a traceback, a hang or raw library output."""
    if importlib.util.find_spec("onnx") is None or importlib.util.find_spec("onnxruntime") is None:
        return {}
    from fuzz_onnx import _npy, externalize, mlp, qdq, tokens
    from onnx import numpy_helper

    def model(m: object, *argv: str, **files: bytes) -> Case:
        return Case("onnx", ("run", "onnx", "m.onnx", *argv), {"m.onnx": m.SerializeToString(), **files})  # type: ignore[attr-defined]

    ext, data = externalize(mlp())
    for e in ext.graph.initializer[0].external_data:
        if e.key == "length":
            e.value = "2048"
    zp = qdq()
    zp.graph.initializer[2].CopyFrom(numpy_helper.from_array(np.zeros(8, np.uint8), "wz"))
    scale = qdq()
    scale.graph.initializer[1].CopyFrom(numpy_helper.from_array(np.full(3, 0.01, np.float32), "ws"))
    scale.graph.initializer[2].CopyFrom(numpy_helper.from_array(np.zeros(3, np.int8), "wz"))
    no_out = mlp()
    del no_out.graph.output[:]
    ids = _npy(np.array([[0, 1, 99, 2]], np.int64))
    compile_zp = Case("onnx", ("compile", "onnx", "m.onnx", "-o", "out"), {"m.onnx": zp.SerializeToString()})
    return {
        "onnx external length 2048": (model(ext, **{"m.onnx.data": data}), "runs past the end"),
        "onnx uint8 zero point, compile": (compile_zp, "inconsistent type tensor(uint8)"),
        "onnx scale length 3 on 8 channels": (model(scale), "has 8 channels"),
        "onnx no outputs": (model(no_out), "no outputs"),
        "onnx --batch 2**63": (model(mlp("N"), "--batch", str(2**63)), "--batch must be an integer"),
        "onnx --batch 1e9": (model(mlp("N"), "--batch", "1000000000"), "--batch must be an integer from 1 to 65536"),
        "onnx --calibrate 1e9": (model(mlp(), "--calibrate", "1000000000"), "--calibrate must be"),
        "onnx --compare 1e9": (model(mlp(), "--compare", "1000000000"), "--compare must be"),
        "onnx --seed -1": (model(mlp(), "--seed", "-1"), "--seed must be"),
        "onnx token id 99": (Case("onnx", ("run", "onnx", "m.onnx", "--input", "ids=ids.npy"),
                                  {"m.onnx": tokens().SerializeToString(), "ids.npy": ids}),
                              "holds id 99 at index (0, 2), outside the 32 rows"),
        "onnx -o ''": (Case("onnx", ("compile", "onnx", "m.onnx", "-o", ""), {"m.onnx": mlp().SerializeToString()}),
                       "-o '': give an output folder"),
    }


CORPUS.update(_onnx_cases())


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_input_is_one_clear_paragraph(name: str) -> None:
    case, says = CORPUS[name]
    outcome, detail = run_one(case, timeout=120)
    assert outcome == "error", f"{case.describe()}: {outcome}: {detail}"
    assert says in detail, detail


@pytest.mark.parametrize("kind", ["file", "dir"])
def test_a_file_named_like_a_builtin_config_does_not_hijack_it(kind: str) -> None:
    """13: `default` in the working directory is not the built-in config `default`."""
    files = {"seed.s": SEED_S, "default": b"name: mine\n"} if kind == "file" else {"seed.s": SEED_S, "default/x": b"x"}
    case = Case("config", ("asm", "seed.s", "--config", "default", "-o", "out.bin"), files, may_write=("out.bin",))
    assert run_one(case, timeout=120) == ("ok", "")
    as_path = Case("config", ("asm", "seed.s", "--config", "./default", "-o", "out.bin"), files)
    outcome, detail = run_one(as_path, timeout=120)
    assert outcome == "error" and "default" in detail
