"""Linking at compile time: a run loads the programs the compiler relocated and checked, and nothing else;
a program that changed after linking faults exactly as loading it whole does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")

from tinynpu.assembler.image import Program  # noqa: E402
from tinynpu.compiler.onnx.encoder_block import SMALL_BLOCK, encoder_block  # noqa: E402
from tinynpu.compiler.onnx.network import CompiledNetwork, compile_onnx  # noqa: E402
from tinynpu.compiler.onnx.runtime.execute import execute  # noqa: E402
from tinynpu.isa import load_isa  # noqa: E402
from tinynpu.simulator import Machine  # noqa: E402
from tinynpu.simulator.faults import SimFault  # noqa: E402


@pytest.fixture(scope="module")
def block(tmp_path_factory: pytest.TempPathFactory) -> CompiledNetwork:
    return compile_onnx(encoder_block(tmp_path_factory.mktemp("link") / "block.onnx", shape=SMALL_BLOCK))


def test_a_run_relocates_and_decodes_nothing_the_compiler_linked(block: CompiledNetwork) -> None:
    image = block.image
    linked = dict(image.programs)
    assert linked and set(map(id, linked.values())) == set(image.checked)  # every linked program was checked
    assert not image.loaded  # linking writes nothing into the network's machine
    ex = execute(block.net, block.make_inputs(0), cache=block.cache, image=image)
    assert image.programs == linked  # the run placed every program where the compiler linked it
    assert set(image.loaded) <= set(image.checked)
    assert sum(r.programs for r in ex.runs.values()) >= len(image.loaded) > 0
    reference = execute(block.net, block.make_inputs(0), cache=None)
    for name in block.net.outputs:
        assert np.array_equal(ex.values[name], reference.values[name])


def _moved_past_dram(program: Program, dram_bytes: int) -> Program:
    """``program`` with its last store moved to the last 8 bytes of DRAM, where it runs past the end."""
    isa = load_isa()
    store = isa.by_mnemonic["store"]
    f = store.field_map["dram"]
    words = list(program.words)
    at = [i for i, w in enumerate(words) if w & store.mask == store.match][-1]
    words[at] = (words[at] & ~(((1 << f.width) - 1) << f.lsb)) | ((dram_bytes - 8) << f.lsb)
    return Program(words=tuple(words), tensors=program.tensors, config_name=program.config_name,
                   build_hash=program.build_hash)


@pytest.mark.parametrize("keep_link", [False, True], ids=["replaced", "changed-under-its-link"])
def test_a_program_changed_after_linking_faults_as_a_whole_load_does(tmp_path: Path, keep_link: bool) -> None:
    """A relocated program replaced in the image after linking (``replaced``: no link-time decoding of it), or
    one whose words differ from the decoding checked at link time (``changed-under-its-link``: the run's load
    compares them): the run's fault is the one loading the changed program on a fresh machine raises."""
    cn = compile_onnx(encoder_block(tmp_path / "block.onnx", shape=SMALL_BLOCK))
    assert not cn.net.evaluators  # the host's evaluators are built by the first run, not by the linker
    image = cn.image
    key, original = next(iter(image.programs.items()))
    bad = _moved_past_dram(original, cn.cfg.dram_bytes)
    image.programs[key] = bad
    if keep_link:
        image.checked[id(bad)] = image.checked[id(original)]
    with pytest.raises(SimFault) as whole:
        Machine(cn.cfg).load(bad)
    with pytest.raises(SimFault) as run:
        execute(cn.net, cn.make_inputs(0), cache=cn.cache, image=image)
    assert str(run.value) == str(whole.value)


def test_linking_is_a_compile_phase(block: CompiledNetwork) -> None:
    assert block.timings["link"] > 0
    assert len(block.image.checked) == len(block.image.programs)


def test_touching_the_image_keeps_its_bytes(block: CompiledNetwork) -> None:
    image = block.image
    data = np.arange(1, 200, dtype=np.uint8)
    image.machine.write_dram(image.weight_base - 50, data)
    image.touch()
    assert image.machine.read_dram(image.weight_base - 50, len(data)) == data.tobytes()


def test_an_export_run_on_its_committed_inputs_relocates_nothing_more() -> None:
    """The linker runs on seeded inputs; a run on other inputs (BERT's committed ones, with its attention mask)
    places every program where the linker did."""
    from tinynpu.compiler.onnx.bench_transformers import MODELS_DIR, make_case
    from tinynpu.compiler.onnx.frontend.calibration import CalibrationSource
    from tinynpu.compiler.onnx.verify.checks import check_inputs

    case = make_case("bert_sdpa", MODELS_DIR)
    assert case.feeds is not None
    cn = compile_onnx(case.path, calibration=CalibrationSource((case.feeds,), "the committed inputs"))
    linked = dict(cn.image.programs)
    execute(cn.net, check_inputs(cn, case.feeds), cache=cn.cache, image=cn.image)
    assert cn.image.programs == linked and set(cn.image.loaded) <= set(cn.image.checked)
