"""The typed network IR every stage of the ONNX path shares: one frozen dataclass per kind of step.

The front end (:mod:`~tinynpu.compiler.onnx.frontend`) produces a :class:`Network`
of steps; the lowering (:mod:`~tinynpu.compiler.onnx.lower`) compiles the
accelerator steps; the runtime (:mod:`~tinynpu.compiler.onnx.runtime`) executes
them; verification (:mod:`~tinynpu.compiler.onnx.verify`) reads them.  Each kind
carries exactly the fields it needs, checked when it is built (a bad field is a
front-end bug, reported as :class:`StepError` naming the step), so no stage
looks a parameter up by a string key or finds one missing at run time.

Steps are immutable (and compared by identity: their weights are arrays): a
stage that decides otherwise (the lowering moving a conv whose input shape is
unknown to the host) builds a new step with :func:`dataclasses.replace`, and
what a stage derives (a step's programs) it keeps in its own tables, keyed by
the step's name.  A residual add's fixed-point
scaling (:class:`~tinynpu.compiler.onnx.lower.eltwise.TermScale`) is part of its
step: whether the terms can be held decides where the front end places it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from tinynpu.compiler.onnx.intops import Epilogue
from tinynpu.compiler.onnx.lower.eltwise import TermScale
from tinynpu.compiler.onnx.lower.norm import NormParams
from tinynpu.compiler.onnx.lower.rotary import RotaryParams
from tinynpu.compiler.onnx.lower.softmax import SoftmaxParams

NPU = "npu"
HOST = "host"


class StepError(ValueError):
    """A step built with fields that contradict each other (a bug of the front end, never the user's)."""


@dataclass(frozen=True)
class QParam:
    """A QuantizeLinear/DequantizeLinear's scale and zero point (per tensor, or per ``axis``)."""

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None

    @property
    def per_tensor(self) -> bool:
        return self.scale.size == 1

    @property
    def s(self) -> float:
        return float(self.scale.reshape(-1)[0])

    @property
    def z(self) -> int:
        return int(self.zero_point.reshape(-1)[0])

    def same_as(self, other: QParam) -> bool:
        """Both per tensor, with one scale, zero point and type: a Q/DQ pair of the two is the identity."""
        return (self.per_tensor and other.per_tensor and self.s == other.s and self.z == other.z
                and self.zero_point.dtype == other.zero_point.dtype)


@dataclass(frozen=True, kw_only=True, eq=False)
class Step:
    """One unit of work of the network, in execution order (a concrete kind below, never this class).

    Attributes:
        name: The ONNX node's name (or its first output's).
        op: The ONNX op type (``Conv``, ``Gemm``, ``MatMul``, ``Add``, ``QuantizeLinear``, ...).
        where: ``npu`` or ``host``.
        inputs, outputs: Tensor names in the environment.
        reason: Why a node that could in principle run on the accelerator runs on the host.
        kind: How it runs (a class constant): ``conv``, ``gemm``, ``matmul``, ``add`` (either place),
            ``product`` (accelerator), ``concat``, ``move``, ``mask`` (host, integer select), ``mask_codes`` (host,
            a per-run mask's codes), ``maxpool``, ``avgpool`` (host integer),
            ``onnx`` (host, the ONNX operator on float values), ``lut``, ``softmax``, ``norm``, ``rotary``
            (either place: the nonlinear programs, or their ONNX nodes on the host).
    """

    kind: ClassVar[str] = ""
    #: Where a step of this kind may run.
    places: ClassVar[tuple[str, ...]] = (HOST,)

    name: str
    op: str
    where: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    reason: str = ""

    def __post_init__(self) -> None:
        if self.where not in self.places:
            raise StepError(f"step {self.name!r} ({self.kind}): it cannot run on the {self.where!r}.")
        if not self.outputs:
            raise StepError(f"step {self.name!r} ({self.kind}): it has no outputs.")

    def fail(self, why: str) -> StepError:
        """The error naming this step, for a field check of a kind."""
        return StepError(f"step {self.name!r} ({self.kind}): {why}")


@dataclass(frozen=True, kw_only=True, eq=False)
class LayerStep(Step):
    """An int8 x int8 -> int32 layer with its requantizing epilogue (conv, gemm, matmul)."""

    places: ClassVar[tuple[str, ...]] = (NPU, HOST)

    epilogue: Epilogue
    activation: str | None = None  # the Relu/Clip fused into the epilogue's clamp, if any

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.activation not in (None, "Relu", "Clip"):
            raise self.fail(f"activation {self.activation!r} is neither Relu nor Clip.")


@dataclass(frozen=True, kw_only=True, eq=False)
class ConvStep(LayerStep):
    """A convolution: KRSC int8 weights, ONNX pads ``(top, left, bottom, right)``."""

    kind: ClassVar[str] = "conv"

    weight: np.ndarray  # K x R x S x C/group, int8
    weight_name: str
    group: int
    pads: tuple[int, int, int, int]
    strides: tuple[int, int]
    dilations: tuple[int, int]

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.weight.ndim != 4 or self.weight.dtype != np.int8:
            raise self.fail(f"its weight is {self.weight.dtype} {self.weight.shape}, not int8 K x R x S x C.")
        if self.group < 1 or self.weight.shape[0] % self.group:
            raise self.fail(f"{self.weight.shape[0]} output channels do not split into {self.group} groups.")
        if (len(self.pads), len(self.strides), len(self.dilations)) != (4, 2, 2):
            raise self.fail(f"pads {self.pads}, strides {self.strides}, dilations {self.dilations} are not 2-D.")
        if len(self.inputs) != 1:
            raise self.fail(f"it reads {len(self.inputs)} tensors, not one.")


@dataclass(frozen=True, kw_only=True, eq=False)
class GemmStep(LayerStep):
    """A Gemm or a MatMul by constant weights: ``epilogue(A @ weight.T)``, weight N x K."""

    kind: ClassVar[str] = "gemm"

    weight: np.ndarray  # N x K, int8
    weight_name: str
    trans_a: bool = False  # Gemm's transA: the host transposes A first

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.weight.ndim != 2 or self.weight.dtype != np.int8:
            raise self.fail(f"its weight is {self.weight.dtype} {self.weight.shape}, not int8 N x K.")
        if len(self.inputs) != 1:
            raise self.fail(f"it reads {len(self.inputs)} tensors, not one.")


@dataclass(frozen=True, eq=False)
class OperandView:
    """A matmul operand (or its output) that is a layout move of another tensor (attention's head split and
    merge, folded by :mod:`~tinynpu.compiler.onnx.frontend.heads`): element ``i`` of the operand, of
    ``shape``, is element ``index.flat[i]`` of ``tensor`` (of ``tensor_shape``, flat, row-major); ``moves``
    names the move steps it replaces."""

    tensor: str
    tensor_shape: tuple[int, ...]
    shape: tuple[int, ...]
    index: np.ndarray  # int64, of ``shape``
    moves: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, eq=False)
class MatmulStep(LayerStep):
    """A (batched) MatMul between two int8 activations (attention).

    ``views``: for A, B and the output, None (the tensor named in ``inputs``/``outputs`` as it is), or the
    :class:`OperandView` through which it is read from (written into) that tensor.
    """

    kind: ClassVar[str] = "matmul"

    views: tuple[OperandView | None, OperandView | None, OperandView | None] = (None, None, None)

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.inputs) != 2:
            raise self.fail(f"it reads {len(self.inputs)} tensors, not two.")
        for i, view in enumerate(self.views):
            name = (*self.inputs, self.outputs[0])[i]
            if view is not None and (view.tensor != name or view.index.shape != view.shape):
                raise self.fail(f"its view of {name!r} is of {view.tensor!r} with an index of {view.index.shape}.")

    def operand_shapes(self, shapes: dict[str, tuple[int, ...]]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The shapes of A and B as the MatMul sees them."""
        a, b = (v.shape if v is not None else shapes[name] for v, name in zip(self.views, self.inputs, strict=False))
        return a, b


@dataclass(frozen=True)
class AddTerm:
    """One input of a residual add: ``(x - zero_point) * ratio`` with ``ratio = s_x / s_out``."""

    name: str
    ratio: float
    zero_point: int


@dataclass(frozen=True, kw_only=True, eq=False)
class AddStep(Step):
    """``clamp(round(sum_i (x_i - z_i) r_i) + z, lo, hi)``: on the accelerator (``scales``), or on the host."""

    kind: ClassVar[str] = "add"
    places: ClassVar[tuple[str, ...]] = (NPU, HOST)

    terms: tuple[AddTerm, ...]
    zero_point: int
    lo: int
    hi: int
    scales: tuple[TermScale, ...] | None = None  # each term's fixed-point scaling on the accelerator
    relu: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.terms) < 2 or tuple(t.name for t in self.terms) != self.inputs:
            raise self.fail("its terms are not its inputs (two or more).")
        if not -128 <= self.lo <= self.hi <= 127:
            raise self.fail(f"clamp {self.lo}..{self.hi} is not within int8.")
        if self.where == NPU and (self.scales is None or len(self.scales) != len(self.terms)):
            raise self.fail("on the accelerator it needs one fixed-point scale per term.")


@dataclass(frozen=True, kw_only=True, eq=False)
class ProductStep(Step):
    """``clamp(round(x * u * r))``: the elementwise product of two int8 tensors of one shape and zero point 0
    (SwiGLU's ``silu(gate) * up``), requantized once on the accelerator (``scale``: ``r = s_x s_u / s_y``).

    ``gate``: 256 entries of 16 bits that ``x``'s codes are looked up in first (SwiGLU's SiLU fused in:
    :mod:`~tinynpu.compiler.onnx.frontend.gated`), ``r`` then with the table's scale for ``s_x``.
    """

    kind: ClassVar[str] = "product"
    places: ClassVar[tuple[str, ...]] = (NPU,)

    scale: TermScale
    gate: np.ndarray | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.inputs) != 2 or len(self.outputs) != 1:
            raise self.fail("it reads two int8 tensors and writes one.")
        if self.gate is not None and (self.gate.shape != (256,) or np.any(np.abs(self.gate) >= 2**15)):
            raise self.fail(f"its gate table is {self.gate.dtype} {self.gate.shape}, not 256 entries of 16 bits.")


@dataclass(frozen=True, kw_only=True, eq=False)
class ConcatStep(Step):
    """The int8 inputs, all at the output's scale, concatenated along ``axis``."""

    kind: ClassVar[str] = "concat"

    axis: int


@dataclass(frozen=True, kw_only=True, eq=False)
class NodeStep(Step):
    """An ONNX node the host runs as it is (the fields :class:`OnnxStep` and :class:`MoveStep` share)."""

    node: Any  # onnx.NodeProto
    opset: int


@dataclass(frozen=True, kw_only=True, eq=False)
class OnnxStep(NodeStep):
    """The ONNX operator itself on the host (``onnx.reference``), on dequantized float values."""

    kind: ClassVar[str] = "onnx"


@dataclass(frozen=True, kw_only=True, eq=False)
class MoveStep(NodeStep):
    """A data-movement operator (Reshape, Transpose, ...) on the int8 values, at one scale in and out.

    ``inputs[0]`` is the int8 tensor standing in for the node's first (dequantized) input.
    """

    kind: ClassVar[str] = "move"


@dataclass(frozen=True, kw_only=True, eq=False)
class MaskStep(Step):
    """An additive attention mask as a select on int8 scores (:mod:`~tinynpu.compiler.onnx.frontend.masks`).

    ``inputs`` are the int8 scores and the float mask (0 where kept, at most ``floor`` where masked, broadcast
    to the scores); the output holds the scores at their own scale, kept entries clamped to [-127, 127],
    masked ones -128: the masked softmax's code for "masked".
    """

    kind: ClassVar[str] = "mask"

    floor: float

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.inputs) != 2 or len(self.outputs) != 1:
            raise self.fail("it reads the int8 scores and the mask, and writes one tensor.")
        if not self.floor < 0:
            raise self.fail(f"its mask floor {self.floor!r} is not negative.")


@dataclass(frozen=True, kw_only=True, eq=False)
class MaskCodesStep(Step):
    """A per-run additive mask as the int8 codes a masked softmax program adds itself
    (:mod:`~tinynpu.compiler.onnx.lower.select`): one byte per position of ``shape`` (the mask's shape, 1 along
    every axis it does not vary on), -128 where masked, 0 where kept, as ``[rows, keys]`` rows.

    The codes come from ``source`` (default ``inputs[0]``): the float mask (masked at or below ``floor``), or,
    with ``branches``, the condition of the ``Where(cond, branches[0], branches[1])`` that made it.  ``chain``:
    the host operators (in order) that compute ``source`` from ``inputs``, the network inputs, when the step
    took them over (the input's conversion, :mod:`~tinynpu.compiler.onnx.lower.mask_fusion`).
    """

    kind: ClassVar[str] = "mask_codes"

    floor: float
    shape: tuple[int, ...]
    branches: tuple[float, float] | None = None
    source: str = ""
    chain: tuple[OnnxStep, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.inputs or len(self.outputs) != 1 or not self.shape or (self.chain and not self.source):
            raise self.fail("it reads a mask (or its condition, or the network inputs it is computed from) and "
                            "writes one tensor of codes.")


@dataclass(frozen=True, kw_only=True, eq=False)
class NonlinearStep(Step, ABC):
    """A transformer nonlinearity lowered to an accelerator program on int8 rows, or, where the
    lowering cannot take it (``reason``) or ``--nonlinear host`` asks, its ONNX nodes on the host.

    ``inputs[0]`` is the int8 tensor, ``outputs[0]`` the int8 tensor of the QuantizeLinear the nodes end at;
    ``chain`` holds those nodes (from the DequantizeLinear to the QuantizeLinear, in order) as host steps.
    A concrete kind's parameters (``None`` when they cannot be built: then it runs on the host).
    """

    places: ClassVar[tuple[str, ...]] = (NPU, HOST)

    chain: tuple[OnnxStep, ...]

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.inputs) != 1 + self.side_inputs() or len(self.outputs) != 1:
            raise self.fail("it reads one int8 tensor (and a per-run mask's codes, if it has one) and writes one.")
        if self.where == NPU and self.lowered() is None:
            raise self.fail("on the accelerator it needs its integer parameters.")

    @abstractmethod
    def lowered(self) -> Any:
        """The integer parameters of the program (None: host only); each kind says which."""

    def side_inputs(self) -> int:
        """Inputs after the int8 tensor: a softmax's per-run mask codes (:class:`MaskCodesStep`)."""
        return 0


@dataclass(frozen=True, kw_only=True, eq=False)
class LutStep(NonlinearStep):
    """A unary elementwise segment as a 256-entry table of output codes (one ``vlut``)."""

    kind: ClassVar[str] = "lut"

    table: np.ndarray | None  # 256 int8 output codes, entry i for input code i - 128

    def lowered(self) -> Any:
        return self.table


@dataclass(frozen=True, kw_only=True, eq=False)
class SoftmaxStep(NonlinearStep):
    """Softmax along the last axis (:mod:`~tinynpu.compiler.onnx.lower.softmax`)."""

    kind: ClassVar[str] = "softmax"

    params: SoftmaxParams | None

    def lowered(self) -> Any:
        return self.params

    def side_inputs(self) -> int:
        return int(self.params is not None and self.params.runtime is not None)


@dataclass(frozen=True, kw_only=True, eq=False)
class NormStep(NonlinearStep):
    """LayerNorm or RMSNorm along the last axis (:mod:`~tinynpu.compiler.onnx.lower.norm`)."""

    kind: ClassVar[str] = "norm"

    params: NormParams | None

    def lowered(self) -> Any:
        return self.params


@dataclass(frozen=True, kw_only=True, eq=False)
class RotaryStep(NonlinearStep):
    """A rotary position embedding ``x*cos + rotate_half(x)*sin`` (:mod:`~tinynpu.compiler.onnx.lower.rotary`)."""

    kind: ClassVar[str] = "rotary"

    params: RotaryParams | None

    def lowered(self) -> Any:
        return self.params


@dataclass(frozen=True)
class PoolWindow:
    """A 2-D pooling window: ONNX pads ``(top, left, bottom, right)``."""

    kernel: tuple[int, int]
    strides: tuple[int, int]
    pads: tuple[int, int, int, int]
    ceil_mode: bool


@dataclass(frozen=True, kw_only=True, eq=False)
class MaxPoolStep(Step):
    """A max pool on int8 values (input and output at one scale)."""

    kind: ClassVar[str] = "maxpool"

    window: PoolWindow


@dataclass(frozen=True, kw_only=True, eq=False)
class AvgPoolStep(Step):
    """Window sums of ``x - input_zero_point``, then one requantization per window size."""

    kind: ClassVar[str] = "avgpool"

    window: PoolWindow
    input_scale: float
    input_zero_point: int
    scale: float
    zero_point: int
    count_include_pad: bool

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (self.input_scale > 0 and self.scale > 0):
            raise self.fail(f"scales {self.input_scale} -> {self.scale} are not positive.")


@dataclass
class Network:
    """The quantized network as steps, its constants and its interface.

    Attributes:
        evaluators: The host's ``onnx.reference`` evaluator of each ONNX step, by step name, built
            on its first run and reused by every later run (a cache of the runtime).
    """

    steps: list[Step]
    constants: dict[str, np.ndarray]
    inputs: list[str]
    outputs: list[str]
    shapes: dict[str, tuple[int, ...]]
    opset: int
    qparams: dict[str, QParam]  # every quantized activation tensor (Q outputs)
    evaluators: dict[str, Any] = field(default_factory=dict, repr=False)


__all__ = ["HOST", "NPU", "AddStep", "AddTerm", "AvgPoolStep", "ConcatStep", "ConvStep", "GemmStep", "LayerStep",
           "LutStep", "MaskCodesStep", "MaskStep", "MatmulStep", "MaxPoolStep", "MoveStep", "Network", "NodeStep",
           "NonlinearStep", "NormStep", "OnnxStep", "OperandView", "PoolWindow", "ProductStep", "QParam", "RotaryStep",
           "SoftmaxStep",
           "Step", "StepError"]
