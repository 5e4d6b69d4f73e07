"""Export the PyTorch models the ONNX tests load, as a user of torch would, with both of torch's exporters.

Run by hand, in an environment of its own (torch, torchvision and transformers
are a development extra, never dependencies of tinynpu, and CI does not
install them)::

    python3 -m venv .venv-export
    .venv-export/bin/pip install -r requirements/export.txt
    .venv-export/bin/python tests/models/export.py            # every model, every exporter, into tests/models/
    .venv-export/bin/python tests/models/export.py --list     # what it would write
    .venv-export/bin/python tests/models/export.py bert_sdpa gpt2_past -o /tmp/exports

Every model is built from its config with seeded random weights (the
library's own initialization: normal-sized weights, not a test pattern), at
batch 1 and fixed shapes, small enough to commit: hidden 32, two layers,
a 256-token vocabulary.  Each is written three ways where torch can:

- ``NAME.onnx`` + ``NAME.onnx.data``: ``torch.onnx.export(..., dynamo=True)``,
  torch's default exporter, at opset 18 with the weights in the data file
  beside the model, as it writes them by default;
- ``NAME.op17.onnx``: the same exporter at opset 17, weights inline;
- ``NAME.legacy.onnx``: the TorchScript exporter (``dynamo=False``), opset 17.

The inputs each model takes are written beside it as ``NAME.inputs.npz``
(token ids drawn from the vocabulary, an attention mask of ones, images
from a normal distribution), so a test feeds what the model expects.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
SEQ = 16  # tokens per sequence
HIDDEN = 32  # model width of the transformers; their FFNs are twice as wide
VOCAB = 256
PAST = 8  # tokens already in the KV cache of a decode-step export


@dataclass(frozen=True)
class Built:
    """A model ready to export: the module, its example inputs by name, and its outputs' names."""

    module: torch.nn.Module
    inputs: dict[str, torch.Tensor]
    outputs: tuple[str, ...]
    legacy: bool = True  # whether the TorchScript exporter can take it
    notes: tuple[str, ...] = field(default_factory=tuple)


class _Positional(torch.nn.Module):
    """``module(**inputs)`` as a module of positional tensors returning a tuple: what both exporters take."""

    def __init__(self, module: torch.nn.Module, names: tuple[str, ...], pick: Callable[[Any], tuple[Any, ...]]):
        super().__init__()
        self.module, self.names, self.pick = module, names, pick

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.pick(self.module(**dict(zip(self.names, args, strict=True))))


def _tokens(generator: torch.Generator, length: int = SEQ) -> torch.Tensor:
    return torch.randint(0, VOCAB, (1, length), generator=generator, dtype=torch.int64)


def _bert(attention: str) -> Built:
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=2 * HIDDEN, max_position_embeddings=64, type_vocab_size=2,
                        attn_implementation=attention)
    model = BertModel(config).eval()
    g = torch.Generator().manual_seed(1)
    inputs = {"input_ids": _tokens(g), "attention_mask": torch.ones(1, SEQ, dtype=torch.int64),
              "token_type_ids": torch.cat([torch.zeros(1, SEQ // 2), torch.ones(1, SEQ - SEQ // 2)], 1).long()}
    names = tuple(inputs)
    return Built(_Positional(model, names, lambda o: (o.last_hidden_state, o.pooler_output)), inputs,
                 ("last_hidden_state", "pooler_output"))


def _gpt2(attention: str, *, past: bool) -> Built:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=VOCAB, n_embd=HIDDEN, n_layer=2, n_head=2, n_positions=64,
                        bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1, attn_implementation=attention)
    model = GPT2LMHeadModel(config).eval()
    g = torch.Generator().manual_seed(2)
    if not past:
        inputs = {"input_ids": _tokens(g)}
        return Built(_Positional(model, ("input_ids",), lambda o: (o.logits,)), inputs, ("logits",))
    return _decode_step(model, g, layers=2, kv_heads=2, head_dim=HIDDEN // 2)


def _llama(*, past: bool) -> Built:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         attn_implementation="sdpa")
    model = LlamaForCausalLM(config).eval()
    g = torch.Generator().manual_seed(3)
    if not past:
        inputs = {"input_ids": _tokens(g)}
        return Built(_Positional(model, ("input_ids",), lambda o: (o.logits,)), inputs, ("logits",))
    return _decode_step(model, g, layers=2, kv_heads=2, head_dim=HIDDEN // 4)


class _DecodeStep(torch.nn.Module):
    """One decode step with the KV cache as plain tensors: (token, past keys and values per layer) ->
    (logits, present keys and values per layer), the interface of a decoder exported for generation."""

    def __init__(self, model: torch.nn.Module, layers: int):
        super().__init__()
        self.model, self.layers = model, layers

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from transformers import DynamicCache

        cache = DynamicCache()
        for layer in range(self.layers):
            cache.update(past[2 * layer], past[2 * layer + 1], layer)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, cache=cache, use_cache=True)
        present = out.cache
        tensors = []
        for layer in range(self.layers):
            tensors += [present.layers[layer].keys, present.layers[layer].values]
        return (out.logits, *tensors)


def _decode_step(model: torch.nn.Module, g: torch.Generator, *, layers: int, kv_heads: int, head_dim: int) -> Built:
    """A one-token step after PAST tokens, its cache from running the model on those tokens."""
    prompt = _tokens(g, PAST)
    with torch.no_grad():
        cache = model(input_ids=prompt, use_cache=True).cache
    inputs: dict[str, torch.Tensor] = {"input_ids": _tokens(g, 1),
                                       "attention_mask": torch.ones(1, PAST + 1, dtype=torch.int64)}
    outputs = ["logits"]
    for layer in range(layers):
        inputs[f"past_key_values.{layer}.key"] = cache.layers[layer].keys
        inputs[f"past_key_values.{layer}.value"] = cache.layers[layer].values
        outputs += [f"present.{layer}.key", f"present.{layer}.value"]
        assert cache.layers[layer].keys.shape == (1, kv_heads, PAST, head_dim), cache.layers[layer].keys.shape
    return Built(_DecodeStep(model, layers), inputs, tuple(outputs), legacy=False,
                 notes=(f"a decode step: {PAST} cached tokens, one new",))


def _vit_hf() -> Built:
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=HIDDEN, num_hidden_layers=2,
                       num_attention_heads=2, intermediate_size=2 * HIDDEN, num_labels=10, attn_implementation="sdpa")
    model = ViTForImageClassification(config).eval()
    image = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(4))
    return Built(_Positional(model, ("pixel_values",), lambda o: (o.logits,)), {"pixel_values": image}, ("logits",))


def _vit_torchvision() -> Built:
    from torchvision.models import VisionTransformer

    model = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=HIDDEN,
                              mlp_dim=2 * HIDDEN,
                              num_classes=10).eval()
    image = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(5))
    return Built(model, {"x": image}, ("logits",))


def _torchvision(name: str, **kwargs: Any) -> Callable[[], Built]:
    def build() -> Built:
        import torchvision

        torch.manual_seed(6)
        model = getattr(torchvision.models, name)(num_classes=10, **kwargs).eval()
        image = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(6))
        return Built(model, {"x": image}, ("logits",))
    return build


#: Every model this script exports, by name.  The CNNs are torchvision's builders at their narrowest width
#: (and 10 classes), so that their files stay small; their operators are those of the full-size models.
MODELS: dict[str, Callable[[], Built]] = {
    "bert_sdpa": lambda: _bert("sdpa"),
    "bert_eager": lambda: _bert("eager"),
    "gpt2_sdpa": lambda: _gpt2("sdpa", past=False),
    "gpt2_eager": lambda: _gpt2("eager", past=False),
    "gpt2_past": lambda: _gpt2("eager", past=True),
    "llama": lambda: _llama(past=False),
    "llama_past": lambda: _llama(past=True),
    "vit_hf": _vit_hf,
    "vit_torchvision": _vit_torchvision,
    "mobilenet_v2": _torchvision("mobilenet_v2", width_mult=0.25),
    "mobilenet_v3_small": _torchvision("mobilenet_v3_small", width_mult=0.25),
    "resnet18": _torchvision("resnet18"),
    "efficientnet_b0": _torchvision("efficientnet_b0"),
}
EXPORTERS = ("dynamo", "op17", "legacy")


@contextlib.contextmanager
def _quiet() -> Iterator[io.StringIO]:
    """The exporters' progress lines and warnings, kept out of the script's own output."""
    buffer = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        warnings.simplefilter("ignore")
        yield buffer


def export(name: str, built: Built, exporter: str, out: Path) -> Path:
    """Write one export; returns the model's path."""
    suffix = {"dynamo": "", "op17": ".op17", "legacy": ".legacy"}[exporter]
    path = out / f"{name}{suffix}.onnx"
    for stale in (path, path.with_name(path.name + ".data")):
        stale.unlink(missing_ok=True)
    args = tuple(built.inputs.values())
    built.module.eval()  # the TorchScript exporter can leave a module in training mode (dropout on)
    common: dict[str, Any] = {"input_names": list(built.inputs), "output_names": list(built.outputs)}
    with _quiet(), torch.no_grad():
        if exporter == "legacy":
            torch.onnx.export(built.module, args, str(path), dynamo=False, opset_version=17, **common)
        else:
            program = torch.onnx.export(built.module, args, dynamo=True, opset_version=18 if exporter == "dynamo"
                                        else 17, **common)
            assert program is not None
            program.save(str(path), external_data=exporter == "dynamo")
    return path


def check(built: Built, path: Path) -> str:
    """The export run by onnxruntime against the module run by torch: the largest difference per output."""
    import onnxruntime

    with torch.no_grad():
        expected = built.module.eval()(*built.inputs.values())
    expected = expected if isinstance(expected, tuple) else (expected,)
    try:
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        got = session.run(None, {k: v.numpy() for k, v in built.inputs.items()})
    except Exception as exc:  # e.g. torch's opset-17 export of GPT-2 writes Split's opset-18 num_outputs
        return f"onnxruntime refuses it: {str(exc).splitlines()[0][:200]}"
    if len(got) != len(expected):
        return f"{len(got)} outputs, torch gives {len(expected)}"
    return ", ".join(f"{name} {np.abs(g - e.numpy()).max():.1e}"
                     for name, g, e in zip(built.outputs, got, expected, strict=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("names", nargs="*", help=f"models to export (default: all of {', '.join(MODELS)})")
    parser.add_argument("-o", "--out", type=Path, default=HERE, help="folder to write into (default: tests/models)")
    parser.add_argument("--exporters", default=",".join(EXPORTERS),
                        help=f"comma-separated subset of {', '.join(EXPORTERS)} (default: all)")
    parser.add_argument("--list", action="store_true", help="print what would be written, write nothing")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(MODELS))
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    exporters = [e for e in args.exporters.split(",") if e]
    if set(exporters) - set(EXPORTERS):
        parser.error(f"--exporters takes {', '.join(EXPORTERS)}, not {args.exporters!r}")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.names or MODELS:
        if args.list:
            print(name, *exporters)
            continue
        built = MODELS[name]()
        np.savez(args.out / f"{name}.inputs.npz", **{k: v.numpy() for k, v in built.inputs.items()})
        for exporter in exporters:
            if exporter == "legacy" and not built.legacy:
                print(f"{name}: the TorchScript exporter cannot take it (a cache object in its forward); skipped")
                continue
            try:
                path = export(name, built, exporter, args.out)
            except Exception as exc:  # an exporter's refusal is a finding to report, not a reason to stop
                print(f"{name} [{exporter}]: export failed: {type(exc).__name__}: {str(exc).splitlines()[0]}")
                continue
            size = sum(p.stat().st_size for p in (path, path.with_name(path.name + ".data")) if p.exists())
            print(f"{path.name}: {size / 1024:.0f} KiB, onnxruntime against torch: {check(built, path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
