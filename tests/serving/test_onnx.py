"""ONNX export: outputs within 1e-4 of PyTorch for any batch shape, and the exported folder serves as is."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from bertforge.serving.embeddings import SentenceEncoder
from bertforge.serving.onnx_backend import OnnxModel
from bertforge.serving.onnx_export import export_onnx
from bertforge.tasks.heads import HEADS

from needs import require_module

require_module("onnxruntime")
pytestmark = pytest.mark.slow

TEXTS = ["The movie was a delight from start to finish, funny and warm.", "dull", "It is not bad at all.",
         "An overlong, tedious mess that never finds its rhythm or a reason to exist."]


@pytest.fixture(scope="module")
def encoder_onnx(minilm_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("onnx-minilm")
    export_onnx(minilm_dir, out)
    return out


def test_encoder_export_matches_transformers(encoder_onnx, minilm_dir):
    """Against the transformers BERT (an independent implementation), on padded batches of other shapes
    than the traced one."""
    import onnx
    import torch
    transformers = require_module("transformers")
    graph = onnx.load(str(encoder_onnx / "model.onnx"), load_external_data=False).graph
    assert [i.name for i in graph.input] == ["input_ids", "attention_mask", "token_type_ids"]
    assert graph.output[0].name == "last_hidden_state"
    tok = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))
    ref_model = transformers.AutoModel.from_pretrained(str(minilm_dir)).eval()
    onnx_model = OnnxModel.from_pretrained(encoder_onnx)
    for texts in (TEXTS, TEXTS[:1], TEXTS * 3):
        enc = tok(texts, padding=True, return_tensors="pt")
        with torch.no_grad():
            ref = ref_model(**enc).last_hidden_state
        ours = onnx_model(**enc).last_hidden_state
        mask = enc["attention_mask"].bool()
        np.testing.assert_allclose(ours[mask].numpy(), ref[mask].numpy(), atol=1e-4)
    for name in ("config.json", "vocab.txt", "modules.json", "1_Pooling/config.json"):
        assert (encoder_onnx / name).is_file(), name


def test_onnx_sentence_encoder_matches_sentence_transformers(encoder_onnx, st_model):
    ref = st_model.encode(TEXTS)
    ours = SentenceEncoder.load(encoder_onnx, backend="onnx").encode(TEXTS, batch_size=3)
    np.testing.assert_allclose(ours, ref, atol=1e-4)


@pytest.fixture(scope="module")
def sst2_onnx(sst2_folder, tmp_path_factory):
    out = tmp_path_factory.mktemp("onnx-sst2")
    export_onnx(sst2_folder, out)
    return out


def test_task_export_logits_and_predictor(sst2_folder, sst2_onnx):
    from bertforge.tasks.predictor import Predictor
    from bertforge.tokenization import load_tokenizer
    out = sst2_onnx
    assert json.loads((out / "task.json").read_text()) == json.loads((sst2_folder / "task.json").read_text())
    torch_pred = Predictor.load(sst2_folder)
    onnx_pred = Predictor(OnnxModel.from_pretrained(out), load_tokenizer(out),
                          json.loads((out / "task.json").read_text()), out)
    for ours, ref in zip(onnx_pred.predict(TEXTS, batch_size=3), torch_pred.predict(TEXTS, batch_size=3)):
        assert ours["label"] == ref["label"]
        for name in ref["scores"]:
            assert abs(ours["scores"][name] - ref["scores"][name]) < 1e-4


def test_int8_is_smaller_and_close(sst2_folder, sst2_onnx, tmp_path):
    from bertforge.tasks.predictor import Predictor
    from bertforge.tokenization import load_tokenizer
    fp32, int8 = sst2_onnx, tmp_path / "int8"
    export_onnx(sst2_folder, int8, quantize="int8")
    assert (int8 / "model.onnx").stat().st_size < 0.4 * (fp32 / "model.onnx").stat().st_size
    assert json.loads((int8 / "onnx.json").read_text())["quantize"] == "int8"
    task = json.loads((sst2_folder / "task.json").read_text())
    ref = Predictor.load(sst2_folder).predict(TEXTS)
    ours = Predictor(OnnxModel.from_pretrained(int8), load_tokenizer(int8), task, int8).predict(TEXTS)
    # dynamic int8 moves probabilities by a little, not by a lot
    assert max(abs(a["score"] - b["score"]) for a, b in zip(ours, ref)) < 0.05


def test_export_refuses_bad_arguments(minilm_dir, tmp_path):
    with pytest.raises(ValueError, match="--quantize"):
        export_onnx(minilm_dir, tmp_path / "x", quantize="int4")
    with pytest.raises(FileNotFoundError, match="config.json"):
        export_onnx(tmp_path, tmp_path / "y")
    with pytest.raises(ValueError, match="new folder"):
        export_onnx(minilm_dir, minilm_dir)


@pytest.mark.parametrize("head", list(HEADS))
def test_every_head_exports_the_outputs_its_row_names(minilm_dir, tmp_path, head):
    """Each row of the head table: the exported graph returns the row's `onnx_outputs` (onnx.json lists them),
    shaped as the PyTorch model's (a sequence axis where the row says `per_token`) and within 1e-4 of them."""
    import torch

    from bertforge.model.auto import model_class_for
    from bertforge.tokenization import load_tokenizer

    from .conftest import make_task_folder
    row = HEADS[head]
    folder = make_task_folder(minilm_dir, tmp_path / "task", head)
    export_onnx(folder, tmp_path / "onnx")
    assert json.loads((tmp_path / "onnx" / "onnx.json").read_text())["outputs"] == list(row.onnx_outputs)
    torch_model = model_class_for(folder, row.model_role).from_pretrained(folder).eval()
    onnx_model = OnnxModel.from_pretrained(tmp_path / "onnx")
    enc = dict(load_tokenizer(folder)(TEXTS[::-1] + TEXTS[:1], padding=True, return_tensors="pt"))
    if row.inputs == "choices":  # (batch, choices, sequence), as the export traces it
        enc = {k: v[:, None].expand(-1, 3, -1).contiguous() for k, v in enc.items()}
    with torch.no_grad():
        ref = torch_model(**enc)
    ours = onnx_model(**enc)
    for name in row.onnx_outputs:
        got, want = getattr(ours, name), getattr(ref, name)
        assert tuple(got.shape) == tuple(want.shape), name
        assert (got.ndim >= 2 and got.shape[1] == enc["input_ids"].shape[-1]) == row.per_token, name
        if row.per_token:
            mask = enc["attention_mask"].bool()
            got, want = got[mask], want[mask]
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-4)


def test_int8_export_keeps_only_the_quantizers_errors(sst2_folder, tmp_path, caplog):
    """onnxruntime's quantizer logs each tensor it skips through the root logger (about 40 lines for MiniLM):
    none of it reaches the user, while an error it logs and bertforge's own messages still do."""
    import logging

    from bertforge.serving.onnx_export import quantizer_errors_only
    caplog.set_level(logging.INFO)
    export_onnx(sst2_folder, tmp_path / "int8", quantize="int8")
    assert not [r for r in caplog.records if "onnxruntime" in r.pathname], [r.getMessage() for r in caplog.records][:5]
    with quantizer_errors_only():
        logging.info("Quantization parameters for tensor x not specified")
        logging.error("a real failure")
        logging.getLogger("bertforge.export").info("ours")
    assert [r.getMessage() for r in caplog.records] == ["a real failure", "ours"]


@pytest.mark.parametrize("name", ["config_sentence_transformers.json", "special_tokens_map.json", "1_Pooling",
                                  "1_Pooling/config.json"])
def test_export_copies_no_file_from_outside_the_folder(tmp_model_copy, tmp_path_factory, name):
    from bertforge.folder_files import FolderFileError
    from bertforge.serving.onnx_export import folder_files_to_copy
    folder = tmp_model_copy
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.json").write_text('{"secret": 1}')
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    assert "1_Pooling/config.json" in folder_files_to_copy(folder)
    target = folder / name
    if target.is_dir():
        import shutil
        shutil.rmtree(target)
        target.symlink_to(outside)
    else:
        target.unlink(missing_ok=True)
        target.symlink_to(outside / "secret.json")
    with pytest.raises(FolderFileError, match="outside the folder"):
        folder_files_to_copy(folder)
    out = tmp_path_factory.mktemp("export") / "out"
    with pytest.raises(FolderFileError, match="outside the folder"):  # refused before anything is exported
        export_onnx(folder, out)
    assert not out.exists()


@pytest.fixture
def tmp_model_copy(tiny_model, tmp_path):
    import shutil
    return Path(shutil.copytree(tiny_model, tmp_path / "model"))


def _session_outputs(folder, enc, names, path=None):
    """The graph (`folder`'s model.onnx, or `path`) run by onnxruntime directly (not through bertforge's OnnxModel)."""
    import onnxruntime as ort
    session = ort.InferenceSession(str(path or folder / "model.onnx"), providers=["CPUExecutionProvider"])
    feed = {i.name: enc[i.name].numpy().astype("int64") for i in session.get_inputs()}
    return dict(zip(names, session.run(names, feed)))


def test_encoder_graph_gives_the_folders_sentence_vectors(encoder_onnx, minilm_dir, st_model):
    """One call of the graph gives sentence-transformers' vectors (mean pooling over real tokens, unit length, as
    MiniLM's modules.json declares), and `SentenceEncoder` on the onnx backend takes them from the graph."""
    from bertforge.tokenization import load_tokenizer
    enc = load_tokenizer(encoder_onnx)(TEXTS, padding=True, return_tensors="pt")
    graph = _session_outputs(encoder_onnx, enc, ["sentence_embedding"])["sentence_embedding"]
    np.testing.assert_allclose(graph, st_model.encode(TEXTS), atol=1e-4)
    onnx_encoder = SentenceEncoder.load(encoder_onnx, backend="onnx")
    assert onnx_encoder.model.sentence_pooling == ("mean", True)
    torch_vectors = SentenceEncoder.load(minilm_dir, backend="torch").encode(TEXTS, batch_size=3)
    np.testing.assert_allclose(onnx_encoder.encode(TEXTS, batch_size=3), torch_vectors, atol=1e-4)
    # another pooling than the graph's: pooled in Python from the token vectors, as the torch backend does
    np.testing.assert_allclose(onnx_encoder.encode(TEXTS, pooling="cls", normalize=False),
                               SentenceEncoder.load(minilm_dir).encode(TEXTS, pooling="cls", normalize=False),
                               atol=1e-4)


@pytest.fixture(scope="module")
def optimized_onnx(minilm_dir, tmp_path_factory):
    from bertforge.cli import main
    out = tmp_path_factory.mktemp("onnx-optimized") / "export"
    assert main(["export", "--model", str(minilm_dir), "--output", str(out), "--optimize"]) == 0
    return out


def test_optimized_export_holds_fused_kernels(optimized_onnx):
    """ONNX Runtime's optimizer finds bertforge's attention, residual layer norms, embeddings and GELU."""
    import collections

    import onnx
    ops = collections.Counter(n.op_type for n in onnx.load(str(optimized_onnx / "model.onnx")).graph.node)
    assert ops["Attention"] == 6 and ops["SkipLayerNormalization"] == 12, ops
    assert ops["EmbedLayerNormalization"] == 1 and ops["BiasGelu"] == 6, ops
    assert ops["Softmax"] == 0 and ops["LayerNormalization"] == 0, ops
    assert json.loads((optimized_onnx / "onnx.json").read_text())["fused"]["Attention"] == 6


def test_optimized_export_computes_positions_inside_the_embedding_kernel(optimized_onnx):
    """The fused embedding takes no position ids (its kernel counts 0..seq-1 itself), so no Range/Expand chain
    computes them in the graph on every call, as in the peer's graph of the same model."""
    import collections

    import onnx
    nodes = onnx.load(str(optimized_onnx / "model.onnx")).graph.node
    (embed,) = [n for n in nodes if n.op_type == "EmbedLayerNormalization"]
    assert len([name for name in embed.input if name]) == 7, list(embed.input)  # ids, segments, 3 tables, gamma, beta
    ops = collections.Counter(n.op_type for n in nodes)
    assert ops["Range"] == 0 and ops["Expand"] <= 1, ops  # the one Expand left belongs to the normalisation


@pytest.mark.parametrize("side", ["right", "left"])
def test_optimized_export_matches_transformers(optimized_onnx, minilm_dir, st_model, side):
    """Token vectors equal transformers' BERT within 1e-4, and sentence vectors its masked mean at unit length
    (sentence-transformers' own vectors, for right padding), on batches padded on either side: the fused
    attention reads the raw mask, not a length per row."""
    import torch
    transformers = require_module("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(str(minilm_dir), padding_side=side)
    ref_model = transformers.AutoModel.from_pretrained(str(minilm_dir)).eval()
    for texts in (TEXTS, TEXTS[1:2], TEXTS * 2):
        enc = tok(texts, padding=True, return_tensors="pt")
        with torch.no_grad():
            ref = ref_model(**enc).last_hidden_state
        ours = _session_outputs(optimized_onnx, enc, ["last_hidden_state", "sentence_embedding"])
        mask = enc["attention_mask"].bool().numpy()
        np.testing.assert_allclose(ours["last_hidden_state"][mask], ref.numpy()[mask], atol=1e-4)
        summed = (ref.numpy() * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        np.testing.assert_allclose(ours["sentence_embedding"],
                                   summed / np.linalg.norm(summed, axis=1, keepdims=True), atol=1e-4)
        if side == "right":
            np.testing.assert_allclose(ours["sentence_embedding"], st_model.encode(texts), atol=1e-4)


@pytest.mark.parametrize("family", ["bert", "roberta", "albert", "distilbert", "electra"])
def test_every_family_exports_optimized_and_equal(family, minilm_dir, tmp_path):
    """A tiny random encoder of each family, exported with --optimize, gives its PyTorch token vectors within
    1e-4. ALBERT and ELECTRA catch ONNX Runtime's embedding fusion dropping the
    segment table of projected embeddings. BERT's graph is also held to the peer's graph of the same weights."""
    import torch

    from bertforge.model.auto import family as family_of
    from bertforge.tokenization import BertTokenizer
    tok = BertTokenizer.from_pretrained(minilm_dir)
    spec = family_of(family)
    config = spec.config_class(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=64, max_position_embeddings=128)
    torch.manual_seed(0)
    model = spec.model_class("base")(config).eval()
    model.save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    export_onnx(tmp_path / "model", tmp_path / "onnx", optimize=True)
    enc = tok(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        ref = model(**{k: enc[k] for k in ("input_ids", "attention_mask")}).last_hidden_state
    ours = OnnxModel.from_pretrained(tmp_path / "onnx")(**enc).last_hidden_state
    mask = enc["attention_mask"].bool()
    np.testing.assert_allclose(ours[mask].numpy(), ref[mask].numpy(), atol=1e-4)
    if family == "bert":
        _assert_transformers_graph(tmp_path / "model", tmp_path / "onnx", enc, ref[mask].numpy())


def _token_vector_ops(graph) -> dict[str, int]:
    """Op types of the nodes the graph's `last_hidden_state` depends on (a pooling tail after it left out)."""
    import collections
    nodes = list(graph.node)
    producer = {out: i for i, node in enumerate(nodes) for out in node.output}
    seen, todo = set(), ["last_hidden_state"]
    while todo:
        i = producer.get(todo.pop())
        if i is not None and i not in seen:
            seen.add(i)
            todo.extend(nodes[i].input)
    return collections.Counter(nodes[i].op_type for i in seen)


def _transformers_optimized(folder: Path, enc, target: Path) -> Path:
    """The peer's graph of the same weights: transformers' BERT traced by torch.onnx.export and optimized by ONNX
    Runtime's transformer optimizer with its default options (what optimum applies)."""
    import torch
    from onnxruntime.transformers.optimizer import optimize_model
    transformers = require_module("transformers")
    hf = transformers.AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    names, axes = ["input_ids", "attention_mask", "token_type_ids"], {0: "batch", 1: "sequence"}

    class TokenVectors(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = hf

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)[0]

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(TokenVectors(), tuple(enc[k] for k in names), str(target), input_names=names,
                          output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                          dynamic_axes={**{n: axes for n in names}, "last_hidden_state": axes})
    optimize_model(str(target), model_type="bert", num_heads=hf.config.num_attention_heads,
                   hidden_size=hf.config.hidden_size).save_model_to_file(str(target))
    return target



def _assert_transformers_graph(folder: Path, exported: Path, enc, pytorch) -> None:
    """Up to its token vectors, the optimized graph holds the very nodes, op type by op type, of transformers' BERT
    of the same weights exported and optimized the peer's way: the same fused kernels and no shape arithmetic
    (Shape / Gather / Concat / Reshape) the peer's graph lacks; and its token vectors (at real tokens) equal the
    peer graph's and the PyTorch model's (`pytorch`) within 1e-5."""
    import onnx
    peer = _transformers_optimized(folder, enc, exported.parent / "peer.onnx")
    ours = _token_vector_ops(onnx.load(str(exported / "model.onnx")).graph)
    assert ours == _token_vector_ops(onnx.load(str(peer)).graph), ours
    assert ours["Attention"] and ours["SkipLayerNormalization"] and ours["EmbedLayerNormalization"] == 1, ours
    mask = enc["attention_mask"].bool().numpy()
    got = _session_outputs(exported, enc, ["last_hidden_state"])["last_hidden_state"][mask]
    np.testing.assert_allclose(got, _session_outputs(None, enc, ["last_hidden_state"], peer)["last_hidden_state"][mask],
                               atol=1e-5)
    np.testing.assert_allclose(got, pytorch, atol=1e-5)
